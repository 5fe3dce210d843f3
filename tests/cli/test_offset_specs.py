"""`weir consume -o` offset specs, as kcat and rpk spell them."""

from __future__ import annotations

import pytest

from weir.cli.offset_specs import OffsetKind, OffsetSpec, parse_partition_offset_spec


@pytest.mark.parametrize(
    ("text", "partition", "spec"),
    [
        ("beginning", None, OffsetSpec(OffsetKind.BEGINNING)),
        ("earliest", None, OffsetSpec(OffsetKind.BEGINNING)),
        ("END", None, OffsetSpec(OffsetKind.END)),
        ("42", None, OffsetSpec(OffsetKind.ABSOLUTE, 42)),
        ("+3", None, OffsetSpec(OffsetKind.AFTER_BEGINNING, 3)),
        ("-3", None, OffsetSpec(OffsetKind.BEFORE_END, 3)),
        ("@1700000000000", None, OffsetSpec(OffsetKind.TIMESTAMP, 1700000000000)),
        ("2:-1", 2, OffsetSpec(OffsetKind.BEFORE_END, 1)),
    ],
)
def test_offset_specs(text: str, partition: int | None, spec: OffsetSpec) -> None:
    parsed = parse_partition_offset_spec(text)
    assert (parsed.partition, parsed.spec) == (partition, spec)


@pytest.mark.parametrize("text", ["", "x", "+", "-x", "@", "p:1", "1:", "1.5"])
def test_malformed_offset_specs_are_refused(text: str) -> None:
    with pytest.raises(ValueError):
        parse_partition_offset_spec(text)
