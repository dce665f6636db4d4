"""A value read from a run file, checked against the type its declared column holds.

The collected tables' columns are declared with a dtype (`columns`); a value that does not fit is
not coerced: it becomes null and the mismatch is named in the run's `read_errors`.
"""

from __future__ import annotations

import sys
from typing import Literal, overload

from veriharness.runfolder._files import shown_integer

__all__ = ["typed_value"]

# The tables' integer columns are 64-bit (pandas Int64, parquet int64).
_INT64 = range(-(2**63), 2**63)
_FLOAT_MAX = int(sys.float_info.max)


@overload
def typed_value(
    value: object, dtype: Literal["string"], where: str, errors: list[str]
) -> str | None: ...
@overload
def typed_value(
    value: object, dtype: Literal["Int64"], where: str, errors: list[str]
) -> int | None: ...
@overload
def typed_value(
    value: object, dtype: Literal["Float64"], where: str, errors: list[str]
) -> float | None: ...
@overload
def typed_value(
    value: object, dtype: Literal["boolean"], where: str, errors: list[str]
) -> bool | None: ...
@overload
def typed_value(value: object, dtype: str, where: str, errors: list[str]) -> object: ...
def typed_value(value: object, dtype: str, where: str, errors: list[str]) -> object:
    """`value` if it fits `dtype`, else None with the mismatch named in `errors`."""
    if value is None:
        return None
    ok = {
        "string": isinstance(value, str),
        "Int64": isinstance(value, int) and not isinstance(value, bool),
        "Float64": isinstance(value, int | float) and not isinstance(value, bool),
        "boolean": isinstance(value, bool),
    }.get(dtype, True)
    if dtype == "Int64" and isinstance(value, float) and value.is_integer():
        value, ok = int(value), True
    if not ok:
        errors.append(f"{where}: expected {dtype}, got {value!r:.60}")
        return None
    if dtype == "Int64" and isinstance(value, int) and value not in _INT64:
        errors.append(f"{where}: {shown_integer(value)} is outside the 64-bit integer range")
        return None
    if dtype == "Float64" and isinstance(value, int) and abs(value) > _FLOAT_MAX:
        errors.append(f"{where}: {shown_integer(value)} is outside the floating-point range")
        return None
    return value
