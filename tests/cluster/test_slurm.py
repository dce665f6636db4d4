"""The offline matrix through a real single-node SLURM, grouped and ungrouped, and locally.

`slurm_up.sh` starts munge, slurmctld and slurmd on this machine (root, Debian's slurm-wlm and
munge, as `./setup.sh --test` installs them); `slurm_down.sh` stops them after the module. The
workflow runs five times from one copy of the project that is its own git repository, each into
its own results directory outside the copy:

- `grouped`: `--profile profiles/slurm` as it is: one `sbatch` job per session, the render and
  score jobs of both runs in one group job that starts one Chromium;
- `ungrouped`: the same profile without its `groups` entries: one `sbatch` job per rule and run;
- `agents`: the profile with sessions grouped two to a cluster job on two CPUs, as its comments
  say to set it up (`run_agent: agents`, `agents: 2`, `cores: 2`, `_nodes: 0`);
- `local`: `--cores 2`;
- `uncapped`: only the sessions, through a profile whose `run_agent` claims no `agent_sessions`
  (an executor that does not count sessions, as a second invocation, a restarted submitter or
  `--immediate-submit` does not), with `--resources agent_sessions=1`: SLURM runs both session
  jobs at once, and the cap must hold all the same (session_slots.py, P-67).

Only execution settings differ, so the first four must give the same run folders, the same
identity hashes and the same table rows. Each asks for `analysis` (everything `all` makes but the
report): the report is a local rule, whatever the profile, and these tests read none of it.

The one change to the profile's behaviour: the first status check comes after 2 s instead of 40 s,
so the small matrix finishes in minutes. The runs go side by side to keep the module short; their
outputs do not overlap, so Snakemake's locks allow it, and each SLURM run keeps its SLURM logs in
its own folder. The node offers four times the machine's CPUs (slurm_up.sh), so SLURM runs every
mode's jobs as they come and only the caps decide how many sessions run at once.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import NamedTuple

import pandas as pd
import pytest
import yaml

from support.project_copy import copy_project
from veriharness._util.programs import find_claude

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
PROFILE = ROOT / "profiles" / "slurm"
# One task in both conditions: two sessions per mode are enough for everything asked here (two
# sessions side by side in one job, one render group over several runs), and halve the time.
TASKS = ["landing-page"]
CONDITIONS = ["b3-absent", "b3-present"]
EXPERIMENT = "example"
# The rules that run as cluster jobs; the rest are `localrules` of the workflow.
CLUSTER_RULES = {"run_agent", "render_answer", "score_answer", "annotate_calls", "score_trajectory"}
GROUPED_RULES = {"render_answer", "score_answer", "annotate_calls", "score_trajectory"}
MODES = ("grouped", "ungrouped", "agents", "local", "uncapped")
CLUSTER_MODES = ["grouped", "ungrouped", "agents"]
# The uncapped mode's command line cap (its profile's run_agent claims none of it).
UNCAPPED_CAP = 1
SESSIONS_PER_JOB = 2
# What a finished run folder must hold, whatever else it holds.
REQUIRED = ["run.json", "outcome.json", "answer/answer.html", "render/render.png",
            "audit.json", "metrics.json"]  # fmt: skip
KEY_COLUMNS = ["condition", "task", "replicate"]
RUN_TIMEOUT_S = 900
STOP_GRACE_S = 60
FAST_STATUS = ["--slurm-init-seconds-before-status-checks", "2"]

pytestmark = pytest.mark.slow


class Finished(NamedTuple):
    """One finished `snakemake` invocation: its results and its console output."""

    experiment: Path
    output: str


def _run_script(name: str, state_dir: Path) -> str:
    result = subprocess.run([str(HERE / name), str(state_dir)], capture_output=True, text=True,
                            timeout=300)  # fmt: skip
    assert result.returncode == 0, f"{name} failed:\n{result.stdout}\n{result.stderr}"
    return result.stdout


@pytest.fixture(scope="module")
def slurm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    state_dir = tmp_path_factory.mktemp("slurm-state")
    try:
        last = _run_script("slurm_up.sh", state_dir).strip().splitlines()[-1]
        assert last == "SLURM_CONF=/etc/slurm/slurm.conf", last
        yield state_dir
    finally:
        _run_script("slurm_down.sh", state_dir)


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    results = tmp_path_factory.mktemp("results")
    files = {
        # Sessions only (no external answer set): the test is about how their jobs are sent.
        f"config/cluster-test-{mode}.yaml": f"tasks: {json.dumps(TASKS)}\n"
        "external_answers: []\n"
        f"execution:\n  results_dir: {json.dumps(str(results / mode))}\n"
        for mode in MODES
    }
    return copy_project(
        tmp_path_factory.mktemp("project"), TASKS, files, "Project copy for the cluster test"
    )


def _ungrouped_profile(project: Path) -> Path:
    """profiles/slurm without its groups: what a researcher gets by deleting those entries."""
    settings = yaml.safe_load((PROFILE / "config.yaml").read_text())
    del settings["groups"], settings["group-components"]
    folder = project.parent / "profile-ungrouped"
    folder.mkdir(exist_ok=True)
    (folder / "config.yaml").write_text(yaml.safe_dump(settings))
    return folder


def _agents_profile(project: Path) -> Path:
    """profiles/slurm with sessions grouped SESSIONS_PER_JOB to a cluster job, set up as its
    comments describe."""
    settings = yaml.safe_load((PROFILE / "config.yaml").read_text())
    settings["groups"]["run_agent"] = "agents"
    settings["group-components"]["agents"] = SESSIONS_PER_JOB
    settings["cores"] = SESSIONS_PER_JOB
    settings["set-resources"]["run_agent"]["_nodes"] = 0
    folder = project.parent / "profile-agents"
    folder.mkdir(exist_ok=True)
    (folder / "config.yaml").write_text(yaml.safe_dump(settings))
    return folder


def _uncapped_profile(project: Path) -> Path:
    """profiles/slurm with run_agent claiming no agent_sessions: Snakemake submits every session
    at once, whatever the cap."""
    settings = yaml.safe_load((PROFILE / "config.yaml").read_text())
    settings["set-resources"]["run_agent"]["agent_sessions"] = 0
    folder = project.parent / "profile-uncapped"
    folder.mkdir(exist_ok=True)
    (folder / "config.yaml").write_text(yaml.safe_dump(settings))
    return folder


def _start(project: Path, mode: str, args: list[str], targets: list[str]) -> subprocess.Popen[str]:
    env = {
        **os.environ,
        "VERIHARNESS_CLAUDE": str(find_claude()),
        "VERIHARNESS_SLURM_PARTITION": "debug",
        "VERIHARNESS_SLURM_ACCOUNT": "veriharness",
    }
    command = [sys.executable, "-m", "snakemake", "--configfile",
               f"config/cluster-test-{mode}.yaml", *args, *targets]  # fmt: skip
    return subprocess.Popen(command, cwd=project, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)  # fmt: skip


def _results(project: Path, mode: str) -> Path:
    config = (project / "config" / f"cluster-test-{mode}.yaml").read_text()
    return Path(json.loads(config.split("results_dir:", 1)[1].strip()))


def _in_results(project: Path, mode: str, paths: list[str]) -> list[str]:
    """`results/...` targets under the mode's own results folder."""
    return [str(_results(project, mode) / p.removeprefix("results/")) for p in paths]


def _finish(process: subprocess.Popen[str], project: Path, mode: str) -> Finished:
    output, _ = process.communicate(timeout=RUN_TIMEOUT_S)
    assert process.returncode == 0, f"{mode} run failed:\n{output[-8000:]}"
    return Finished(_results(project, mode) / EXPERIMENT, output)


@pytest.fixture(scope="module")
def runs(slurm: Path, project: Path) -> dict[str, Finished]:
    arguments = {
        "grouped": ["--profile", str(PROFILE), *FAST_STATUS],
        "ungrouped": ["--profile", str(_ungrouped_profile(project)), *FAST_STATUS],
        "agents": ["--profile", str(_agents_profile(project)), *FAST_STATUS],
        "local": ["--cores", "2"],
        "uncapped": ["--profile", str(_uncapped_profile(project)), *FAST_STATUS,
                     "--resources", f"agent_sessions={UNCAPPED_CAP}", "mllm_requests=4"],
    }  # fmt: skip
    for mode in [*CLUSTER_MODES, "uncapped"]:
        arguments[mode] += ["--slurm-logdir", str(project / ".snakemake" / f"slurm-{mode}")]
    # The uncapped mode asks for the sessions only: what it shows ends with them.
    outcomes = [f"results/{EXPERIMENT}/{c}/{t}/r1/outcome.json" for c in CONDITIONS for t in TASKS]
    processes = {
        mode: _start(project, mode, arguments[mode],
                     _in_results(project, mode, outcomes) if mode == "uncapped" else ["analysis"])
        for mode in MODES
    }  # fmt: skip
    try:
        return {mode: _finish(process, project, mode) for mode, process in processes.items()}
    finally:
        for process in processes.values():
            _stop(process)


def _stop(process: subprocess.Popen[str]) -> None:
    """SIGTERM first: Snakemake then cancels its SLURM jobs itself."""
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def _run_dirs(experiment: Path) -> dict[tuple[str, str], Path]:
    return {(c, t): experiment / c / t / "r1" for c in CONDITIONS for t in TASKS}


def _files(run: Path) -> set[str]:
    return {str(p.relative_to(run)) for p in run.rglob("*") if p.is_file()}


def _slurm_job(job_id: str) -> dict[str, str]:
    text = subprocess.run(["scontrol", "show", "job", "-o", job_id], capture_output=True,
                          text=True, check=True).stdout  # fmt: skip
    return dict(field.split("=", 1) for field in text.split() if "=" in field)


def _jobs_by_rule(project: Path, mode: str) -> dict[str, list[dict[str, str]]]:
    """Every SLURM job of one run, found through the log the profile keeps for each."""
    logs = project / ".snakemake" / f"slurm-{mode}"
    return {d.name.removeprefix("rule_"): [_slurm_job(log.stem) for log in d.glob("**/*.log")]
            for d in logs.iterdir()}  # fmt: skip


def _most_at_once(spans: list[tuple[str, str]]) -> int:
    """The most spans running at one moment (ISO times of one zone sort as text). An end and a
    start at the same second are one after the other. Counting the spans that overlap one span
    instead gave 3 for two at a time (A, B; A ends, C starts; B ends): docs/decisions.md P-67."""
    changes = sorted([(start, 1) for start, _ in spans] + [(end, -1) for _, end in spans])
    running = most = 0
    for _, change in changes:
        running += change
        most = max(most, running)
    return most


def _job_spans(jobs: list[dict[str, str]]) -> list[tuple[str, str]]:
    """When each SLURM job started and ended, in SLURM's accounting."""
    return [(job["StartTime"], job["EndTime"]) for job in jobs]


def _check_resources(job: dict[str, str], rule: str, cpus: int, mem_mb: int, minutes: int) -> None:
    assert (job["JobState"], job["Partition"]) == ("COMPLETED", "debug"), job
    assert (job["NumCPUs"], job["MinMemoryNode"]) == (str(cpus), f"{mem_mb}M"), (rule, job)
    hours, minutes = divmod(minutes, 60)
    assert job["TimeLimit"] == f"{hours:02d}:{minutes:02d}:00", (rule, job)


def _session_cap() -> int:
    """The cap on concurrent sessions: profiles/default sets it, for cluster runs too."""
    default = yaml.safe_load((ROOT / "profiles" / "default" / "config.yaml").read_text())
    caps = dict(entry.split("=") for entry in default["resources"])
    return int(caps["agent_sessions"])


def _wanted(profile: dict, rule: str) -> dict:
    return {**profile["default-resources"], **profile["set-resources"].get(rule, {})}


def test_ungrouped_cluster_jobs_ran_one_per_rule_and_run(
    runs: dict[str, Finished], project: Path
) -> None:
    profile = yaml.safe_load((PROFILE / "config.yaml").read_text())
    by_rule = _jobs_by_rule(project, "ungrouped")
    assert set(by_rule) == CLUSTER_RULES, sorted(by_rule)
    for rule, jobs in by_rule.items():
        assert len(jobs) == len(TASKS) * len(CONDITIONS), (rule, jobs)
        wanted = _wanted(profile, rule)
        for job in jobs:
            _check_resources(job, rule, 1, wanted["mem_mb"], int(wanted["runtime"]))
    assert _most_at_once(_job_spans(by_rule["run_agent"])) <= _session_cap()
    submitted = runs["ungrouped"].output.count("has been submitted with SLURM jobid")
    assert submitted == sum(len(jobs) for jobs in by_rule.values()), runs["ungrouped"].output
    assert "has been submitted with SLURM" not in runs["local"].output


def test_grouped_render_and_score_ran_in_one_cluster_job(
    runs: dict[str, Finished], project: Path
) -> None:
    profile = yaml.safe_load((PROFILE / "config.yaml").read_text())
    assert profile["group-components"]["render_score"] >= len(TASKS) * len(CONDITIONS)
    by_rule = _jobs_by_rule(project, "grouped")
    group = "group_render_score_" + "_".join(sorted(GROUPED_RULES))
    assert set(by_rule) == {"run_agent", group}, sorted(by_rule)
    assert len(by_rule["run_agent"]) == len(TASKS) * len(CONDITIONS)
    [job] = by_rule[group]
    # The plugin runs a group's jobs one after another: one CPU, the memory of one job, and a
    # time limit of the sum of the jobs' runtimes.
    minutes = sum(int(_wanted(profile, r)["runtime"]) for r in GROUPED_RULES) * len(TASKS) * 2
    _check_resources(job, group, 1, _wanted(profile, "render_answer")["mem_mb"], minutes)
    submitted = runs["grouped"].output.count("has been submitted with SLURM jobid")
    assert submitted == len(TASKS) * len(CONDITIONS) + 1, runs["grouped"].output


def _session_span(run: Path) -> tuple[datetime, datetime]:
    """When a session started and finished, from its outcome record."""
    outcome = json.loads((run / "outcome.json").read_text())
    return datetime.fromisoformat(outcome["started_at"]), datetime.fromisoformat(
        outcome["finished_at"]
    )


def _group_runs(log: Path) -> list[tuple[str, str]]:
    """The (condition, task) of each job a group job ran, from the group's SLURM log."""
    found = re.findall(r"wildcards: condition=([^,\s]+), task=([^,\s]+)", log.read_text())
    return sorted(set(found))


def test_grouped_sessions_ran_side_by_side_in_one_cluster_job(
    runs: dict[str, Finished], project: Path
) -> None:
    profile = yaml.safe_load((_agents_profile(project) / "config.yaml").read_text())
    by_rule = _jobs_by_rule(project, "agents")
    agents = by_rule.pop("group_agents_run_agent")
    sessions = len(TASKS) * len(CONDITIONS)
    assert len(agents) == sessions // SESSIONS_PER_JOB, agents
    wanted = _wanted(profile, "run_agent")
    for job in agents:
        # Side by side: the CPUs and memory of SESSIONS_PER_JOB sessions, the time of one.
        _check_resources(job, "agents", SESSIONS_PER_JOB, SESSIONS_PER_JOB * wanted["mem_mb"],
                         int(wanted["runtime"]))  # fmt: skip
    # Render, score and annotation keep their one-CPU group whatever `cores` is.
    [render_group] = by_rule.values()
    minutes = sum(int(_wanted(profile, r)["runtime"]) for r in GROUPED_RULES) * sessions
    mem_mb = _wanted(profile, "render_answer")["mem_mb"]
    _check_resources(render_group[0], "render_score", 1, mem_mb, minutes)
    # Every session ran in exactly one group job, and those of one job overlap in time.
    logs = sorted(
        (project / ".snakemake" / "slurm-agents" / "group_agents_run_agent").glob("**/*.log")
    )
    members = [_group_runs(log) for log in logs]
    assert sorted(key for group in members for key in group) == sorted(
        (c, t) for c in CONDITIONS for t in TASKS
    ), members
    experiment = runs["agents"].experiment
    for group in members:
        assert len(group) == SESSIONS_PER_JOB, members
        first, second = (_session_span(experiment / c / t / "r1") for c, t in group)
        assert first[0] < second[1] and second[0] < first[1], (
            "the sessions of one cluster job ran one after another",
            group,
            first,
            second,
        )


def _launch_reported(experiment: Path) -> int:
    """Renders that report a browser launch: each browser reports it with its first page."""
    records = [json.loads(p.read_text()) for p in experiment.glob("*/*/r1/render/render.json")]
    assert len(records) == len(TASKS) * len(CONDITIONS)
    return sum("launch_ms" in record["timings"] for record in records)


def test_one_browser_per_cluster_job(runs: dict[str, Finished]) -> None:
    assert _launch_reported(runs["grouped"].experiment) == 1
    assert _launch_reported(runs["ungrouped"].experiment) == len(TASKS) * len(CONDITIONS)
    # Locally the renders share the run's browsers, one per render running at once.
    assert 1 <= _launch_reported(runs["local"].experiment) <= len(TASKS) * len(CONDITIONS)


@pytest.mark.parametrize("mode", CLUSTER_MODES)
def test_every_run_folder_holds_the_same_files(runs: dict[str, Finished], mode: str) -> None:
    local, cluster = _run_dirs(runs["local"].experiment), _run_dirs(runs[mode].experiment)
    for key, local_run in local.items():
        files = _files(local_run)
        missing = [f for f in REQUIRED if f not in files]
        assert not missing, f"{local_run}: missing {missing}"
        assert _files(cluster[key]) == files, key
        for run in (local_run, cluster[key]):
            outcome = json.loads((run / "outcome.json").read_text())
            assert outcome["status"] == "ok", (run, outcome)
        for name in ("render/render.png", "render/dom.json"):
            assert (cluster[key] / name).read_bytes() == (local_run / name).read_bytes(), key


@pytest.mark.parametrize("mode", CLUSTER_MODES)
def test_sessions_in_cluster_jobs_are_contained_as_locally(
    runs: dict[str, Finished], mode: str
) -> None:
    """Jobs run as root here, so each session makes its own cgroup and tmpfs inside the job
    (docs/cluster.md says what an ordinary user's job records instead)."""
    for run in _run_dirs(runs[mode].experiment).values():
        outcome = json.loads((run / "outcome.json").read_text())
        assert outcome["session_network"] == "none", run
        limits = outcome["enforced_limits"]
        assert limits["memory"]["by"] in ("cgroup-v1", "cgroup-v2"), (run, limits)
        assert limits["processes"]["by"] == limits["memory"]["by"], (run, limits)
        assert limits["disk"] == {"by": "tmpfs", "value": 1024, "note": None}, (run, limits)


@pytest.mark.parametrize("mode", CLUSTER_MODES)
def test_identity_hashes_match(runs: dict[str, Finished], mode: str) -> None:
    local, cluster = _run_dirs(runs["local"].experiment), _run_dirs(runs[mode].experiment)
    hashes = set()
    for key, local_run in local.items():
        local_record = json.loads((local_run / "run.json").read_text())
        cluster_record = json.loads((cluster[key] / "run.json").read_text())
        assert local_record["identity_hash"].startswith("sha256:")
        assert cluster_record["identity_hash"] == local_record["identity_hash"], key
        assert cluster_record["identity"] == local_record["identity"], key
        hashes.add(local_record["identity_hash"])
    assert len(hashes) == len(local), "every run of the matrix has its own identity"


def _tables(experiment: Path) -> dict[str, pd.DataFrame]:
    paths = [*experiment.glob("tables/*.csv"), experiment / "comparison.csv",
             *experiment.glob("*/summary.csv")]  # fmt: skip
    return {str(p.relative_to(experiment)): pd.read_csv(p) for p in paths}


def _keys(frame: pd.DataFrame) -> list[tuple[str, ...]]:
    columns = [c for c in KEY_COLUMNS if c in frame.columns]
    return sorted(tuple(str(v) for v in row) for row in frame[columns].itertuples(index=False))


@pytest.mark.parametrize("mode", CLUSTER_MODES)
def test_tables_have_the_same_rows(runs: dict[str, Finished], mode: str) -> None:
    local, cluster = _tables(runs["local"].experiment), _tables(runs[mode].experiment)
    assert "tables/runs.csv" in local
    assert sorted(cluster) == sorted(local)
    for name, frame in local.items():
        assert list(cluster[name].columns) == list(frame.columns), name
        assert len(cluster[name]) == len(frame), name
        assert _keys(cluster[name]) == _keys(frame), name
    expected = sorted((c, t, "1") for c in CONDITIONS for t in TASKS)
    assert _keys(local["tables/runs.csv"]) == expected


def _recorded_cap(experiment: Path) -> int:
    """agent_sessions as the mode's main Snakemake process recorded it, which run-agent holds."""
    merged = json.loads((experiment / "config.effective.json").read_text())
    return int(merged["scheduler"]["resources"]["agent_sessions"])


def _outcomes(experiment: Path) -> list[dict]:
    runs = [experiment / c / t / "r1" for c in CONDITIONS for t in TASKS]
    return [json.loads((run / "outcome.json").read_text()) for run in runs]


@pytest.mark.parametrize("mode", [*CLUSTER_MODES, "local", "uncapped"])
def test_sessions_never_ran_more_at_once_than_the_cap(runs: dict[str, Finished], mode: str) -> None:
    """From the sessions' own start and end (outcome.json), each holding a slot of the cap."""
    experiment = runs[mode].experiment
    cap, outcomes = _recorded_cap(experiment), _outcomes(experiment)
    assert cap == (UNCAPPED_CAP if mode == "uncapped" else _session_cap())
    for outcome in outcomes:
        assert outcome["status"] == "ok", outcome
        assert outcome["session_slot"]["of"] == cap, outcome["session_slot"]
        assert 0 <= outcome["session_slot"]["slot"] < cap, outcome["session_slot"]
    spans = [(o["started_at"], o["finished_at"]) for o in outcomes]
    assert _most_at_once(spans) <= cap, spans


def test_the_cap_held_when_the_executor_did_not_count_sessions(
    runs: dict[str, Finished], project: Path
) -> None:
    """SLURM ran both session jobs at once; the second session waited in its job for the first
    one's slot, said so in its log, and started once the first had finished."""
    jobs = _jobs_by_rule(project, "uncapped")
    assert set(jobs) == {"run_agent"}, sorted(jobs)
    assert len(jobs["run_agent"]) == len(TASKS) * len(CONDITIONS)
    assert _most_at_once(_job_spans(jobs["run_agent"])) == 2 > UNCAPPED_CAP, jobs
    experiment = runs["uncapped"].experiment
    first, second = sorted(_outcomes(experiment), key=lambda o: o["started_at"])
    assert first["session_slot"]["waited_seconds"] < second["session_slot"]["waited_seconds"]
    assert second["session_slot"]["waited_seconds"] > 0
    assert second["started_at"] >= first["finished_at"], (first, second)
    logs = [p.read_text() for p in (experiment / "logs" / "run_agent").glob("*/*/r1.log")]
    waited = [log for log in logs if "waiting for one to be released" in log]
    assert len(waited) == 1, logs
    assert "all 1 session slots (agent_sessions=1) are held" in waited[0], waited[0]
    assert "took session slot 0 of 1 after" in waited[0], waited[0]


@pytest.mark.parametrize("mode", CLUSTER_MODES)
def test_the_study_was_registered_and_its_start_order_recorded_on_the_cluster(
    runs: dict[str, Finished], mode: str
) -> None:
    """Issue 40 under the SLURM profile: the analysis registered before the first session, and
    the seed and the executor's guarantee recorded. Which session job is submitted first is not
    asserted: a job is submitted when it is ready, highest priority first among the ready ones
    (bench/cluster_plan.py checks those priorities on the 20,000-run plan), and the two runs
    here are prepared side by side, so either may be ready first (docs/decisions.md P-60)."""
    experiment = runs[mode].experiment
    registration = json.loads((experiment / "preregistration.json").read_text())
    assert registration["before_sessions"] is True, registration
    assert registration["sessions_found"] == 0, registration
    registered = {(r["condition"], r["task"]) for r in registration["matrix"]["runs"]}
    assert registered == {(c, t) for c in CONDITIONS for t in TASKS}
    record = json.loads((experiment / "experiment.json").read_text())["start_order"]
    assert record["seed"] == registration["order_seed"], (record, registration)
    assert record["keeps_order"] is (mode != "agents"), record
