"""A run file's value is kept only when its table column can hold it."""

from __future__ import annotations

import pytest

from veriharness.collect.typed import typed_value


@pytest.mark.parametrize(
    ("value", "dtype", "kept", "error"),
    [
        (2**63 - 1, "Int64", 2**63 - 1, None),
        (-(2**63), "Int64", -(2**63), None),
        (2**63, "Int64", None, "9223372036854775808 is outside the 64-bit integer range"),
        (12.0, "Int64", 12, None),
        (1e30, "Int64", None, "is outside the 64-bit integer range"),
        (10**400, "Float64", None, "10000000000000000000... (an integer of 401 digits) is outside"),
        (10**300, "Float64", 10**300, None),
        (True, "Int64", None, "expected Int64, got True"),
        ("7", "Float64", None, "expected Float64, got '7'"),
    ],
)
def test_a_value_its_column_cannot_hold_is_null_and_named(
    value: object, dtype: str, kept: object, error: str | None
) -> None:
    errors: list[str] = []
    assert typed_value(value, dtype, "outcome.json:field", errors) == kept
    if error is None:
        assert errors == []
    else:
        assert len(errors) == 1 and errors[0].startswith("outcome.json:field: ")
        assert error in errors[0]
