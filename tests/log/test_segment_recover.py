"""`Segment.recover` (used on compaction's own output, whose only possible damage is
a torn tail): it keeps every whole batch, truncates the rest, and says how much."""

from __future__ import annotations

from pathlib import Path

from weir.format.record_batch import BatchHeader
from weir.log.segment import Segment, segment_file_name

from .conftest import make_batch


def test_recover_truncates_a_torn_tail_and_returns_its_size(tmp_path: Path) -> None:
    whole = make_batch(3, base_offset=0) + make_batch(2, base_offset=3)
    torn = make_batch(4, base_offset=5)[:-7]
    (tmp_path / segment_file_name(0, ".log")).write_bytes(whole + torn)
    segment = Segment(tmp_path, 0, 4096)
    seen: list[int] = []

    def on_batch(header: BatchHeader) -> None:
        seen.append(header.base_offset)

    assert segment.recover(0, on_batch) == len(torn)
    assert seen == [0, 3]
    assert (segment.size_bytes, segment.next_offset) == (len(whole), 5)
    assert (tmp_path / segment_file_name(0, ".log")).stat().st_size == len(whole)
    assert segment.recover(0, on_batch) == 0  # nothing more to cut
    segment.close()
