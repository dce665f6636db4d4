"""Declared vs inferred capability tags: per-call Jaccard and the agreement table.

Compared are the calls the annotator labelled with status `ok` that declare at least one tag
(an `invalid` or `failed` annotation is kept in `inferred_tags` but is no label to compare with).
The declared tags are read as the guess and the inferred ones as the reference: a code's
precision is the share of calls declaring it that the annotator also gave it, its recall the
share of calls the annotator gave it that declare it. Per family, Cohen's kappa measures how far
"the call uses this family" agrees beyond chance (undefined, empty, when both sides never or
always say yes).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from veriharness.collect.columns import TagAgreementRow

__all__ = ["jaccard", "with_declared", "agreement_rows"]


def jaccard(declared: list[str], inferred: list[str]) -> float:
    a, b = set(declared), set(inferred)
    if not a or not b:
        return float("nan")
    return len(a & b) / len(a | b)


def with_declared(inferred: pd.DataFrame, calls: pd.DataFrame) -> pd.DataFrame:
    """`inferred` with the call's declared tags and the per-call Jaccard."""
    keys = ["condition", "task", "replicate", "call_id"]
    declared = calls[keys + ["tags"]].rename(columns={"tags": "declared"})
    out = inferred.drop(columns=["declared"], errors="ignore").merge(declared, on=keys, how="left")
    out["declared"] = [_tags(d) for d in out["declared"]]
    out["jaccard"] = [
        jaccard(d, c) if s == "ok" else float("nan")
        for d, c, s in zip(out["declared"], out["codes"], out["status"], strict=True)
    ]
    return out


def _tags(value: object) -> list[str]:
    """A list column's value as a list (a call missing from mllm_calls has none)."""
    if isinstance(value, list | tuple | np.ndarray):
        return [str(v) for v in value]
    return []


def _ratio(num: int, den: int) -> float:
    return num / den if den else float("nan")


def _kappa(a: np.ndarray, b: np.ndarray) -> float:
    if len(a) == 0:
        return float("nan")
    observed = float(np.mean(a == b))
    pa, pb = float(a.mean()), float(b.mean())
    expected = pa * pb + (1 - pa) * (1 - pb)
    if expected == 1:
        return float("nan")
    return round((observed - expected) / (1 - expected), 12)  # no -3e-16 for a zero


def agreement_rows(inferred: pd.DataFrame) -> list[TagAgreementRow]:
    """Rows of `tag_agreement` from `with_declared`'s output (one annotator per experiment run;
    several are kept apart by the `annotator` column)."""
    rows: list[TagAgreementRow] = []
    for annotator, group in inferred.groupby("annotator", dropna=False, sort=True):
        usable = group[(group["status"] == "ok") & (group["declared"].map(len) > 0)]
        declared = [set(d) for d in usable["declared"]]
        given = [set(c) for c in usable["codes"]]
        n = len(usable)
        base: TagAgreementRow = {"annotator": annotator, "n_calls": n}
        codes = sorted(set().union(*declared, *given)) if n else []
        for code in codes:
            d = sum(code in x for x in declared)
            i = sum(code in x for x in given)
            both = sum(code in x and code in y for x, y in zip(declared, given, strict=True))
            rows.append(
                base
                | {"level": "code", "key": code, "n_declared": d, "n_inferred": i, "n_both": both}
                | {"precision": _ratio(both, d), "recall": _ratio(both, i)}
            )
        for family in sorted({c[0] for c in codes}):
            has_d = np.array([any(c[0] == family for c in x) for x in declared])
            has_i = np.array([any(c[0] == family for c in y) for y in given])
            rows.append(
                base
                | {"level": "family", "key": family, "n_declared": int(has_d.sum())}
                | {"n_inferred": int(has_i.sum()), "n_both": int((has_d & has_i).sum())}
                | {"kappa": _kappa(has_d, has_i)}
            )
        mean = float(usable["jaccard"].mean()) if n else float("nan")
        rows.append(base | {"level": "all", "key": "all", "mean_jaccard": mean})
    return rows
