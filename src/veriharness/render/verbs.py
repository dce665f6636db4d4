"""The render stage's verbs, `render` and `render-reference`: their arguments, and the calls to
`command` (and, with a shared browser, `pool`). Each verb imports its modules when it runs."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

__all__ = [
    "add_render_arguments",
    "add_render_reference_arguments",
    "run_render",
    "run_render_reference",
]


def add_render_arguments(parser: argparse.ArgumentParser) -> None:
    from veriharness.render.browser import add_browser_arguments
    from veriharness.render.pool import POOL_MODES

    parser.add_argument("--answer-dir", type=Path, help="folder holding answer.html")
    parser.add_argument("--reference", type=Path, help="reference.png (sets the viewport)")
    parser.add_argument("--out", type=Path, help="folder for render.png, dom.json, render.json")
    parser.add_argument(
        "--task-dir",
        type=Path,
        help="the task's folder: replay its interactions and render its extra viewports too",
    )
    parser.add_argument(
        "--batch", type=Path, help="JSONL file: answer_dir, reference, out (and task_dir)"
    )
    parser.add_argument(
        "--browser-pool",
        default="none",
        choices=POOL_MODES,
        help="slurm-job: inside a SLURM job, share one Chromium with the job's other renders; "
        "workflow: the same in a SLURM job, elsewhere share the browsers of the Snakemake run "
        "that set $VERIHARNESS_BROWSER_POOL (render/pool.py); otherwise, or with none "
        "(default), launch a browser of its own",
    )
    parser.add_argument(
        "--design2code-blocks",
        action="store_true",
        help="also capture the answer and the task's reference.html recoloured, for "
        "Design2Code's block detection (render/design2code/; score --block-detection design2code)",
    )
    add_browser_arguments(parser)


def _fail(message: str) -> int:
    print(f"veriharness: {message}", file=sys.stderr)
    return 2


def _render_one_in_pool(args: argparse.Namespace) -> int | None:
    """One run handed to a shared browser, by a process that imports no more than the pool's
    client (the pool's server checks the reference and the task, as `_render` would); None when
    the arguments ask for a browser of the verb's own or for more than one run."""
    from veriharness.render.pool import pool_for, render_in_pool

    single = {"answer_dir": args.answer_dir, "reference": args.reference, "out": args.out}
    if args.batch is not None or args.design2code_blocks or None in single.values():
        return None
    pool = pool_for(args.browser_pool)
    if pool is None:
        return None
    request = {k: str(v) for k, v in {**single, "task_dir": args.task_dir}.items() if v}
    status = render_in_pool(pool, request, args.load_timeout, args.chromium)
    print(f"{status:<15} {args.out}")
    return 0


def run_render(args: argparse.Namespace) -> int:
    from veriharness._util import atomic
    from veriharness.render.setup import RenderSetupError

    try:
        pooled = _render_one_in_pool(args)
        return pooled if pooled is not None else _render(args)
    except (RenderSetupError, atomic.AtomicWriteError) as exc:
        return _fail(str(exc))


def _render(args: argparse.Namespace) -> int:
    from veriharness.render.browser import Renderer, RenderSetupError
    from veriharness.render.command import (
        BatchItem,
        read_batch,
        reference_size,
        render_answer,
        task_spec,
    )
    from veriharness.render.d2ccapture import render_recoloured
    from veriharness.render.pool import pool_for, render_in_pool

    single = [args.answer_dir, args.reference, args.out]
    if args.batch is not None:
        if any(v is not None for v in [*single, args.task_dir]):
            raise RenderSetupError(
                "--batch cannot be combined with --answer-dir/--reference/--out/--task-dir"
            )
        items = read_batch(args.batch)
    elif None in single:
        raise RenderSetupError("give --answer-dir, --reference and --out (or --batch FILE)")
    else:
        items = [
            BatchItem(
                answer_dir=args.answer_dir,
                reference=args.reference,
                out=args.out,
                task_dir=args.task_dir,
            )
        ]
    tasks = {}
    for item in items:
        reference_size(item.reference)
        if item.task_dir is not None:
            tasks[item.task_dir] = task_spec(item.task_dir)
    for item in items if args.design2code_blocks else []:
        if not (item.reference.parent / "reference.html").is_file():
            raise RenderSetupError(
                f"--design2code-blocks needs {item.reference.parent / 'reference.html'}"
            )
    pool = pool_for(args.browser_pool)
    if pool is not None and args.design2code_blocks:
        raise RenderSetupError(
            "the browser pool does not take Design2Code captures: "
            "give --design2code-blocks with --browser-pool none"
        )
    if pool is not None:
        for item in items:
            request = {k: str(v) for k, v in item.model_dump().items() if v is not None}
            status = render_in_pool(pool, request, args.load_timeout, args.chromium)
            print(f"{status:<15} {item.out}")
        return 0
    with Renderer(args.load_timeout, args.chromium) as renderer:
        for item in items:
            task = None if item.task_dir is None else tasks[item.task_dir]
            record = render_answer(renderer, item.answer_dir, item.reference, item.out, task)
            step = f" ({record.failed_step})" if record.failed_step else ""
            print(f"{record.status:<15} {item.out}{step}")
            if args.design2code_blocks and record.status == "ok":
                done = render_recoloured(renderer, item.answer_dir, item.reference, item.out)
                print(f"{'design2code':<15} {item.out}: {done}")
    return 0


def add_render_reference_arguments(parser: argparse.ArgumentParser) -> None:
    from veriharness.render.browser import add_browser_arguments

    parser.add_argument(
        "task_dirs",
        type=Path,
        nargs="+",
        metavar="TASK_DIR",
        help="tasks/<id> folder(s) holding task.yaml and reference.html",
    )
    add_browser_arguments(parser)


def run_render_reference(args: argparse.Namespace) -> int:
    from veriharness.render.browser import Renderer, RenderSetupError
    from veriharness.render.command import render_reference, task_viewport

    try:
        for task_dir in args.task_dirs:
            task_viewport(task_dir)
        with Renderer(args.load_timeout, args.chromium) as renderer:
            for task_dir in args.task_dirs:
                dom = render_reference(renderer, task_dir)
                print(
                    f"ok {task_dir}: {dom.viewport.width}x{dom.viewport.height}, "
                    f"{len(dom.texts)} texts, {len(dom.images)} images"
                )
    except RenderSetupError as exc:
        return _fail(str(exc))
    return 0
