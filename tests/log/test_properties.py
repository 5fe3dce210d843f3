"""Random histories: every offset reads back from the batch that holds it,
before and after a restart, and timestamp lookups match a brute-force scan."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from weir.format.record_batch import build_batch, iter_batch_headers
from weir.log.config import LogConfig
from weir.log.flusher import GroupFlusher
from weir.log.partition import PartitionLog

NOW_MS = 1_700_000_000_000

batch_specs = st.lists(
    st.tuples(st.integers(1, 5), st.integers(0, 150), st.integers(0, 1000)),
    min_size=1,
    max_size=40,
)


def check_reads(log: PartitionLog, expected: list[tuple[int, int, int]]) -> None:
    """expected: (base offset, last offset, max timestamp) per batch."""
    end = log.log_end_offset
    for base, last, _ in expected:
        for offset in (base, last):
            records = log.read(offset, bytes_max=1, end_offset=end).records
            header = next(iter(iter_batch_headers(records)))[1]
            assert (header.base_offset, header.last_offset) == (base, last)
    offset, seen = 0, []
    while offset < end:
        result = log.read(offset, bytes_max=700, end_offset=end)
        seen.extend(h.base_offset for _, h in iter_batch_headers(result.records))
        assert result.next_offset > offset
        offset = result.next_offset
    assert seen == [base for base, _, _ in expected]


def check_timestamps(log: PartitionLog, expected: list[tuple[int, int, int]]) -> None:
    for target in range(NOW_MS - 1, NOW_MS + 1002, 97):
        brute = next(((base, ts) for base, _, ts in expected if ts >= target), None)
        assert log.offset_for_timestamp(target) == brute, target


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(specs=batch_specs, segment_bytes=st.sampled_from([1024, 2048, 1 << 20]),
       index_interval_bytes=st.sampled_from([0, 100, 4096]),
       truncate_at=st.integers(0, 200))  # fmt: skip
def test_random_histories_read_back_before_and_after_restart(
    specs: list[tuple[int, int, int]],
    segment_bytes: int,
    index_interval_bytes: int,
    truncate_at: int,
) -> None:
    config = LogConfig.from_overrides(
        {"segment.bytes": str(segment_bytes), "index.interval.bytes": str(index_interval_bytes)}
    )
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp) / "t-0"
        log = PartitionLog.open(directory, config, GroupFlusher())
        expected = []
        for count, value_bytes, ts_delta in specs:
            records = [(None, b"v" * value_bytes, [], NOW_MS + ts_delta)] * count
            result = log.append(build_batch(records), leader_epoch=0, now_ms=NOW_MS)
            expected.append((result.base_offset, result.last_offset, NOW_MS + ts_delta))
        check_reads(log, expected)
        check_timestamps(log, expected)
        log.close()
        log = PartitionLog.open(directory, config, GroupFlusher())
        check_reads(log, expected)
        check_timestamps(log, expected)
        log.truncate_to(truncate_at)
        expected = [batch for batch in expected if batch[1] < truncate_at]
        assert log.log_end_offset == (expected[-1][1] + 1 if expected else 0)
        check_reads(log, expected)
        check_timestamps(log, expected)
        log.close()
        log = PartitionLog.open(directory, config, GroupFlusher())
        check_reads(log, expected)
        check_timestamps(log, expected)
        log.close()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(specs=batch_specs, cut_fraction=st.floats(0, 1), garbage=st.binary(max_size=200))
def test_recovery_keeps_exactly_the_whole_batches_before_a_tear(
    specs: list[tuple[int, int, int]], cut_fraction: float, garbage: bytes
) -> None:
    config = LogConfig.from_overrides({"segment.bytes": "2048", "index.interval.bytes": "100"})
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp) / "t-0"
        log = PartitionLog.open(directory, config, GroupFlusher())
        expected, sizes = [], []
        for count, value_bytes, ts_delta in specs:
            data = build_batch([(None, b"v" * value_bytes, [], NOW_MS + ts_delta)] * count)
            result = log.append(data, leader_epoch=0, now_ms=NOW_MS)
            expected.append((result.base_offset, result.last_offset, NOW_MS + ts_delta))
            sizes.append(len(data))
        log.flush()
        active = log.segments[-1]
        for segment in log.segments:
            segment.close()  # crash
        cut = int(active.size_bytes * cut_fraction)
        with open(active.log_path, "r+b") as f:
            f.truncate(cut)
            f.seek(cut)
            f.write(garbage)
        kept, position = [], 0
        for batch, size in zip(expected, sizes, strict=True):
            if batch[0] >= active.base_offset:
                if position + size > cut:
                    break
                position += size
            kept.append(batch)
        log = PartitionLog.open(directory, config, GroupFlusher())
        assert log.log_end_offset == (kept[-1][1] + 1 if kept else 0)
        check_reads(log, kept)
        check_timestamps(log, kept)
        log.close()
