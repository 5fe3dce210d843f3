"""Log compaction: latest record per key, offsets unchanged, tombstones expire, crash-safe swaps."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from weir.format.record_batch import (
    BatchHeader,
    Record,
    build_batch,
    decode_records,
    iter_batch_headers,
)
from weir.log.checkpoint import write_checkpoint
from weir.log.compaction import (
    CLEANER_CHECKPOINT_FILE_NAME,
    CLEANING_DIRECTORY_NAME,
    MANIFEST_FILE_NAME,
    LogCleaner,
    _manifest_entries,
    _roll_forward,
    build_cleaned_segments,
    read_cleaned_offset,
)
from weir.log.config import LogConfig
from weir.log.flusher import GroupFlusher
from weir.log.manager import LogManager
from weir.log.partition import PartitionLog
from weir.log.segment import LOG_SUFFIX, segment_file_name
from weir.log.settings import LogSettings

from .conftest import NOW_MS, new_partition

OpenLog = Callable[..., PartitionLog]
DAY_MS = 86_400_000
COMPACTED = {
    "cleanup_policy": "compact",
    "segment_bytes": 1024,
    "min_cleanable_dirty_ratio": 0,
}
Pair = tuple[bytes | None, bytes | None]


def put(log: PartitionLog, pairs: Sequence[Pair], *, compression: int = 0, **kw: object) -> int:
    """Append one batch of (key, value) records; returns its base offset."""
    batch = build_batch(
        [(key, value, []) for key, value in pairs],
        timestamp_ms=NOW_MS,
        compression=compression,
        **kw,  # type: ignore[arg-type]
    )
    return log.append(batch, leader_epoch=3, now_ms=NOW_MS).base_offset


def write_updates(log: PartitionLog, keys: int, rounds: int) -> dict[bytes, tuple[int, bytes]]:
    """`rounds` single-record updates of each of `keys` keys, sealed and durable.
    Returns key -> (offset, value) of the latest update."""
    latest = {}
    for round_index in range(rounds):
        for key_index in range(keys):
            key, value = f"key-{key_index}".encode(), f"v{round_index}".encode() * 4
            latest[key] = (put(log, [(key, value)]), value)
    seal(log)
    return latest


def seal(log: PartitionLog) -> None:
    log.roll()
    log.flush()


def read_all(log: PartitionLog) -> list[tuple[BatchHeader, list[Record]]]:
    """Every batch from the log start to the log end, with its records."""
    batches = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        result = log.read(offset, bytes_max=1 << 20, end_offset=log.log_end_offset)
        if not result.records:
            break
        for position, header in iter_batch_headers(result.records):
            data = result.records[position : position + header.size]
            records = decode_records(data, uncompressed_bytes_max=1 << 26, include_control=True)
            batches.append((header, list(records)))
        offset = result.next_offset
    return batches


def latest_by_key(log: PartitionLog) -> dict[bytes | None, list[tuple[int, bytes | None]]]:
    found: dict[bytes | None, list[tuple[int, bytes | None]]] = {}
    for _, records in read_all(log):
        for record in records:
            found.setdefault(record.key, []).append((record.offset, record.value))
    return found


def crash(log: PartitionLog) -> None:
    """Drop the log without a clean close (files stay as written)."""
    log.flush()
    for segment in log.segments:
        segment.close()


# -- what a pass keeps ---------------------------------------------------------


def test_keeps_exactly_the_latest_value_of_every_key_at_its_original_offset(
    open_log: OpenLog,
) -> None:
    log = open_log(**COMPACTED)
    latest = write_updates(log, keys=10, rounds=20)
    end_offset, start_offset = log.log_end_offset, log.log_start_offset
    segments_before = len(log.segments)

    result = LogCleaner().clean(log, NOW_MS)

    assert result is not None and result.records_removed == 190
    found = latest_by_key(log)
    assert found == {key: [latest[key]] for key in latest}
    assert (log.log_end_offset, log.log_start_offset) == (end_offset, start_offset)
    assert len(log.segments) < segments_before
    assert read_cleaned_offset(log.directory) == log.segments[-1].base_offset


def test_a_second_pass_without_new_writes_changes_nothing(open_log: OpenLog) -> None:
    log = open_log(**COMPACTED)
    write_updates(log, keys=5, rounds=5)
    LogCleaner().clean(log, NOW_MS)
    before = [(s.base_offset, s.log_path.read_bytes()) for s in log.segments]
    assert LogCleaner().clean(log, NOW_MS) is None  # nothing dirty: not due
    assert [(s.base_offset, s.log_path.read_bytes()) for s in log.segments] == before


def test_later_writes_supersede_compacted_records(open_log: OpenLog) -> None:
    log = open_log(**COMPACTED)
    write_updates(log, keys=4, rounds=3)
    cleaner = LogCleaner()
    cleaner.clean(log, NOW_MS)
    newest = put(log, [(b"key-0", b"newest")])
    seal(log)
    cleaner.clean(log, NOW_MS)
    assert latest_by_key(log)[b"key-0"] == [(newest, b"newest")]
    assert len(latest_by_key(log)) == 4


def test_rewritten_batch_keeps_offsets_producer_fields_and_leader_epoch(
    open_log: OpenLog,
) -> None:
    log = open_log(**COMPACTED)
    base = put(
        log,
        [(b"a", b"1"), (b"b", b"1"), (b"c", b"1")],
        producer_id=7, producer_epoch=2, base_sequence=0,
    )  # fmt: skip
    put(log, [(b"b", b"2")])
    seal(log)
    LogCleaner().clean(log, NOW_MS)
    header, records = read_all(log)[0]
    assert (header.base_offset, header.last_offset_delta, header.records_count) == (base, 2, 2)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (7, 2, 0)
    assert header.partition_leader_epoch == 3
    assert [(r.offset, r.key) for r in records] == [(base, b"a"), (base + 2, b"c")]
    assert all(r.timestamp_ms == NOW_MS for r in records)


def test_records_without_keys_are_kept(open_log: OpenLog) -> None:
    log = open_log(**COMPACTED)
    keyless = [put(log, [(None, f"n{i}".encode())]) for i in range(3)]
    put(log, [(b"k", b"1")])
    last = put(log, [(b"k", b"2")])
    seal(log)
    LogCleaner().clean(log, NOW_MS)
    found = latest_by_key(log)
    assert [offset for offset, _ in found[None]] == keyless
    assert found[b"k"] == [(last, b"2")]


def test_control_batches_are_kept_as_they_are(open_log: OpenLog) -> None:
    log = open_log(**COMPACTED)
    put(log, [(b"k", b"1")])
    marker = build_batch([(b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x00", [])],
                         timestamp_ms=NOW_MS, is_control=True, producer_id=9,
                         producer_epoch=0, is_transactional=True)  # fmt: skip
    log.append(marker, leader_epoch=3, now_ms=NOW_MS, allow_control_batches=True)
    put(log, [(b"k", b"2")])
    seal(log)
    LogCleaner().clean(log, NOW_MS)
    controls = [header for header, _ in read_all(log) if header.is_control]
    assert len(controls) == 1 and controls[0].base_offset == 1


@pytest.mark.parametrize("codec", [1, 2, 3, 4], ids=["gzip", "snappy", "lz4", "zstd"])
def test_compressed_batches_are_rewritten_with_their_own_codec(
    open_log: OpenLog, codec: int
) -> None:
    log = open_log(**COMPACTED)
    latest: dict[bytes, tuple[int, bytes]] = {}
    for round_index in range(6):
        pairs: list[Pair] = [(f"k{i}".encode(), f"r{round_index}-{i}".encode()) for i in range(4)]
        base = put(log, pairs[round_index % 2 :], compression=codec)
        for delta, (key, value) in enumerate(pairs[round_index % 2 :]):
            assert key is not None and value is not None
            latest[key] = (base + delta, value)
    seal(log)
    LogCleaner().clean(log, NOW_MS)
    assert latest_by_key(log) == {key: [latest[key]] for key in latest}
    assert {header.compression for header, _ in read_all(log)} == {codec}


def test_reader_at_a_removed_offset_gets_the_next_retained_batch(open_log: OpenLog) -> None:
    log = open_log(**COMPACTED)
    write_updates(log, keys=3, rounds=30)
    LogCleaner().clean(log, NOW_MS)
    retained = sorted(offset for batch in latest_by_key(log).values() for offset, _ in batch)
    removed = 5
    assert removed not in retained
    result = log.read(removed, bytes_max=1 << 20, end_offset=log.log_end_offset)
    first = next(iter_batch_headers(result.records))[1]
    assert first.base_offset == min(o for o in retained if o > removed)
    # Past the last retained record of a cleaned segment (a gap before the next segment).
    first_segment = log.segments[0]
    gap = first_segment.next_offset
    if gap < log.segments[1].base_offset:
        result = log.read(gap, bytes_max=1 << 20, end_offset=log.log_end_offset)
        assert next(iter_batch_headers(result.records))[1].base_offset >= gap


def test_the_active_segment_is_untouched(open_log: OpenLog) -> None:
    log = open_log(**COMPACTED)
    write_updates(log, keys=3, rounds=5)
    for value in (b"1", b"2", b"3"):
        put(log, [(b"key-0", value)])  # duplicates in the active segment
    log.flush()
    active = log.segments[-1]
    active_bytes = active.log_path.read_bytes()
    LogCleaner().clean(log, NOW_MS)
    assert log.segments[-1] is active
    assert active.log_path.read_bytes() == active_bytes
    assert [v for _, v in latest_by_key(log)[b"key-0"]] == [b"v4v4v4v4", b"1", b"2", b"3"]


def test_segments_beyond_the_durable_end_are_not_cleaned(open_log: OpenLog) -> None:
    log = open_log(**COMPACTED)
    for value in (b"1", b"2"):
        put(log, [(b"k", value)])
    log.roll()  # sealed but never fsynced: not durable
    assert log.durable_end_offset == 0
    assert LogCleaner().clean(log, NOW_MS) is None
    assert len(latest_by_key(log)[b"k"]) == 2


def test_compact_delete_also_applies_retention(open_log: OpenLog) -> None:
    log = open_log(**{**COMPACTED, "cleanup_policy": "compact,delete", "retention_ms": DAY_MS})
    write_updates(log, keys=3, rounds=20)
    LogCleaner().clean(log, NOW_MS)
    assert log.enforce_retention(NOW_MS + 2 * DAY_MS) > 0
    assert latest_by_key(log) == {}


def test_log_append_time_batches_keep_their_append_time(open_log: OpenLog) -> None:
    log = open_log(**COMPACTED, message_timestamp_type="LogAppendTime")
    put(log, [(b"a", b"1"), (b"b", b"1")])
    put(log, [(b"a", b"2")])
    seal(log)
    LogCleaner().clean(log, NOW_MS + 5)
    header, records = read_all(log)[0]
    assert header.timestamp_type == 1 and header.max_timestamp == NOW_MS
    assert [(r.key, r.timestamp_ms) for r in records] == [(b"b", NOW_MS)]


# -- tombstones and lags -------------------------------------------------------


def test_tombstones_are_kept_for_delete_retention_then_removed(open_log: OpenLog) -> None:
    log = open_log(**COMPACTED, delete_retention_ms=DAY_MS)
    put(log, [(b"gone", b"1")])
    tombstone = put(log, [(b"gone", None)])
    kept = put(log, [(b"kept", b"1")])
    seal(log)
    cleaner = LogCleaner()

    cleaner.clean(log, NOW_MS)
    assert latest_by_key(log)[b"gone"] == [(tombstone, None)]
    header = next(h for h, records in read_all(log) if records[0].key == b"gone")
    assert header.delete_horizon_ms == NOW_MS + DAY_MS
    assert read_all(log)[0][1][0].timestamp_ms == NOW_MS  # record timestamps unchanged

    assert cleaner.clean(log, NOW_MS + DAY_MS - 1) is None
    assert b"gone" in latest_by_key(log)

    result = cleaner.clean(log, NOW_MS + DAY_MS)
    assert result is not None and result.records_removed == 1
    assert latest_by_key(log) == {b"kept": [(kept, b"1")]}


def test_tombstone_horizon_survives_a_restart(open_log: OpenLog) -> None:
    log = open_log(**COMPACTED, delete_retention_ms=DAY_MS)
    put(log, [(b"gone", None)])
    put(log, [(b"other", b"1")])
    seal(log)
    LogCleaner().clean(log, NOW_MS)
    log.close()
    log = open_log(**COMPACTED, delete_retention_ms=DAY_MS)
    put(log, [(b"other", b"2")])  # something dirty, so a fresh cleaner has a pass due
    seal(log)
    LogCleaner().clean(log, NOW_MS + DAY_MS)
    assert b"gone" not in latest_by_key(log)


def test_min_compaction_lag_keeps_recent_segments_uncompacted(open_log: OpenLog) -> None:
    log = open_log(**COMPACTED, min_compaction_lag_ms=DAY_MS)
    write_updates(log, keys=2, rounds=3)
    assert LogCleaner().clean(log, NOW_MS + DAY_MS - 1) is None
    assert len(latest_by_key(log)[b"key-0"]) == 3
    assert LogCleaner().clean(log, NOW_MS + DAY_MS) is not None
    assert len(latest_by_key(log)[b"key-0"]) == 1


def test_below_the_dirty_ratio_no_pass_runs(open_log: OpenLog) -> None:
    log = open_log(**{**COMPACTED, "min_cleanable_dirty_ratio": 0.9})
    write_updates(log, keys=5, rounds=5)
    cleaner = LogCleaner()
    assert cleaner.clean(log, NOW_MS) is not None  # all dirty: ratio 1
    put(log, [(b"key-0", b"new")])
    seal(log)
    assert cleaner.clean(log, NOW_MS) is None  # a little dirt over a clean log


def test_a_full_key_map_compacts_a_prefix_and_the_next_pass_continues(
    open_log: OpenLog,
) -> None:
    log = open_log(**COMPACTED)
    latest = write_updates(log, keys=6, rounds=4)
    cleaner = LogCleaner(keys_max=3)
    first = cleaner.clean(log, NOW_MS)
    assert first is not None and first.cleaned_offset < log.segments[-1].base_offset
    for _ in range(10):
        if cleaner.clean(log, NOW_MS) is None:
            break
    assert latest_by_key(log) == {key: [latest[key]] for key in latest}


# -- recovery ------------------------------------------------------------------


def test_compacted_log_reopens_with_its_gaps_after_clean_and_unclean_shutdown(
    open_log: OpenLog,
) -> None:
    log = open_log(**COMPACTED)
    latest = write_updates(log, keys=4, rounds=20)
    LogCleaner().clean(log, NOW_MS)
    segments = [s.base_offset for s in log.segments]
    pairs = zip(log.segments, log.segments[1:], strict=False)
    assert any(a.next_offset < b.base_offset for a, b in pairs)  # gaps after compaction
    log.close()
    log = open_log(**COMPACTED)
    assert [s.base_offset for s in log.segments] == segments
    assert latest_by_key(log) == {key: [latest[key]] for key in latest}
    crash(log)
    os.unlink(log.directory / "recovery-point-offset-checkpoint")  # scan every segment
    log = open_log(**COMPACTED)
    assert [s.base_offset for s in log.segments] == segments
    assert latest_by_key(log) == {key: [latest[key]] for key in latest}


def prepare_crash(open_log: OpenLog) -> tuple[PartitionLog, dict[bytes, tuple[int, bytes]]]:
    log = open_log(**COMPACTED)
    latest = write_updates(log, keys=5, rounds=15)
    return log, latest


def test_crash_while_writing_cleaned_segments_rolls_back(open_log: OpenLog) -> None:
    log, latest = prepare_crash(open_log)
    before = read_all(log)
    plan = LogCleaner().plan(log, NOW_MS)
    assert plan is not None
    build_cleaned_segments(plan)  # step 1 done, no manifest: the crash comes now
    (log.directory / CLEANING_DIRECTORY_NAME / (MANIFEST_FILE_NAME + ".tmp")).write_text("0\n")
    crash(log)
    log = open_log(**COMPACTED)
    assert not (log.directory / CLEANING_DIRECTORY_NAME).exists()
    assert read_all(log) == before
    assert read_cleaned_offset(log.directory) == 0


@pytest.mark.parametrize("files_moved", [0, 1, 2, 4, 100])
def test_crash_after_the_manifest_rolls_forward(open_log: OpenLog, files_moved: int) -> None:
    log, latest = prepare_crash(open_log)
    end_offset = log.log_end_offset
    plan = LogCleaner().plan(log, NOW_MS)
    assert plan is not None
    result = build_cleaned_segments(plan)
    cleaning = log.directory / CLEANING_DIRECTORY_NAME
    write_checkpoint(cleaning / MANIFEST_FILE_NAME, _manifest_entries(result))
    for name in sorted(os.listdir(cleaning))[:files_moved]:  # part of step 4
        if name != MANIFEST_FILE_NAME:
            os.replace(cleaning / name, log.directory / name)
    crash(log)
    log = open_log(**COMPACTED)
    assert not cleaning.exists()
    assert latest_by_key(log) == {key: [latest[key]] for key in latest}
    assert log.log_end_offset == end_offset
    assert read_cleaned_offset(log.directory) == result.cleaned_offset


def test_crash_after_the_files_moved_but_before_the_swap_in_memory(open_log: OpenLog) -> None:
    log, latest = prepare_crash(open_log)
    plan = LogCleaner().plan(log, NOW_MS)
    assert plan is not None
    result = build_cleaned_segments(plan)
    cleaning = log.directory / CLEANING_DIRECTORY_NAME
    write_checkpoint(cleaning / MANIFEST_FILE_NAME, _manifest_entries(result))
    _roll_forward(log.directory, _manifest_entries(result))
    # The old segments' inodes are still open: readers see the old log, whole.
    assert len(latest_by_key(log)[b"key-0"]) == 15
    crash(log)
    log = open_log(**COMPACTED)
    assert latest_by_key(log) == {key: [latest[key]] for key in latest}


def test_crash_after_removing_an_emptied_segment_before_the_checkpoint(
    open_log: OpenLog,
) -> None:
    log = open_log(**COMPACTED)
    write_updates(log, keys=2, rounds=40)  # middle segments lose every record
    latest = {k: v[-1] for k, v in latest_by_key(log).items()}
    plan = LogCleaner().plan(log, NOW_MS)
    assert plan is not None
    result = build_cleaned_segments(plan)
    assert set(item.base_offset for item in result.replaced) - set(result.written_bases)
    cleaning = log.directory / CLEANING_DIRECTORY_NAME
    write_checkpoint(cleaning / MANIFEST_FILE_NAME, _manifest_entries(result))
    for base in {item.base_offset for item in result.replaced} - set(result.written_bases):
        os.unlink(log.directory / segment_file_name(base, LOG_SUFFIX))
    crash(log)
    log = open_log(**COMPACTED)
    assert {k: v[-1] for k, v in latest_by_key(log).items()} == latest
    assert all(len(v) == 1 for v in latest_by_key(log).values())
    assert (log.directory / CLEANER_CHECKPOINT_FILE_NAME).exists()


def test_pass_is_dropped_when_the_log_changed_meanwhile(open_log: OpenLog) -> None:
    log = open_log(**{**COMPACTED, "cleanup_policy": "compact,delete", "retention_ms": DAY_MS})
    write_updates(log, keys=3, rounds=10)
    cleaner = LogCleaner()
    plan = cleaner.plan(log, NOW_MS)
    assert plan is not None
    result = build_cleaned_segments(plan)
    log.enforce_retention(NOW_MS + 2 * DAY_MS)  # compact,delete: retention deletes segments
    assert cleaner._finish(log, result) is None
    assert not (log.directory / CLEANING_DIRECTORY_NAME).exists()
    assert len(latest_by_key(log).get(b"key-0", [])) <= 10  # retention's result stands


# -- running in the background -------------------------------------------------


async def test_background_pass_on_a_worker_thread(open_log: OpenLog) -> None:
    log = open_log(**COMPACTED)
    latest = write_updates(log, keys=4, rounds=6)
    result = await LogCleaner().clean_in_background(log, NOW_MS)
    assert result is not None
    assert latest_by_key(log) == {key: [latest[key]] for key in latest}
    assert not (log.directory / CLEANING_DIRECTORY_NAME).exists()


async def test_appends_and_reads_go_on_during_a_background_pass(open_log: OpenLog) -> None:
    log = open_log(**COMPACTED)
    latest = write_updates(log, keys=4, rounds=40)
    appended: list[int] = []

    async def produce_and_fetch() -> None:
        for i in range(200):
            appended.append(put(log, [(b"live", str(i).encode())]))
            log.flush()
            assert log.read(0, bytes_max=1 << 20, end_offset=log.log_end_offset).records
            await trio.lowlevel.checkpoint()  # let the pass run between appends

    async with trio.open_nursery() as nursery:
        nursery.start_soon(produce_and_fetch)
        result = await LogCleaner().clean_in_background(log, NOW_MS)
    assert result is not None
    found = latest_by_key(log)
    assert {key: found[key][-1] for key in latest} == latest
    assert all(len(found[key]) == 1 for key in latest)
    assert [offset for offset, _ in found[b"live"]][-1] == appended[-1]


async def test_manager_compacts_only_compacted_topics(tmp_path: Path) -> None:
    manager = LogManager(
        tmp_path,
        GroupFlusher(),
        LogSettings(retention_check_interval_ms=10, log_cleaner_backoff_ms=0),
    )
    overrides = {"cleanup.policy": "compact", "segment.bytes": "1024",
                 "min.cleanable.dirty.ratio": "0"}  # fmt: skip
    compacted = new_partition(manager, "c", 0, LogConfig.from_overrides(overrides))
    plain = new_partition(manager, "p", 0, LogConfig.from_overrides({"segment.bytes": "1024"}))
    for log in (compacted, plain):
        write_updates(log, keys=2, rounds=10)
    assert await manager.compact(NOW_MS) == 1
    assert len(latest_by_key(compacted)[b"key-0"]) == 1
    assert len(latest_by_key(plain)[b"key-0"]) == 10
    with trio.move_on_after(1):
        await manager.run_retention(clock_ms=lambda: NOW_MS)
    manager.close_all()


# -- random histories --------------------------------------------------------

record_specs = st.lists(
    st.tuples(st.sampled_from([b"a", b"b", b"c", b"d", None]), st.booleans()),
    min_size=1,
    max_size=6,
)
history_specs = st.lists(st.tuples(record_specs, st.integers(0, 4)), min_size=1, max_size=40)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(history=history_specs, keys_max=st.integers(1, 5))
def test_random_histories_compact_to_the_latest_record_per_key(
    history: list[tuple[list[tuple[bytes | None, bool]], int]], keys_max: int
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        config = LogConfig.from_overrides(
            {"cleanup.policy": "compact", "segment.bytes": "1024",
             "min.cleanable.dirty.ratio": "0", "delete.retention.ms": str(DAY_MS)}
        )  # fmt: skip
        log = PartitionLog.open(Path(tmp) / "t-0", config, GroupFlusher())
        expected: dict[int, tuple[bytes | None, bytes | None]] = {}
        latest: dict[bytes, int] = {}
        for batch_index, (records, codec) in enumerate(history):
            pairs: list[Pair] = [
                (key, None if tombstone and key else f"{batch_index}".encode())
                for key, tombstone in records
            ]
            base = put(log, pairs, compression=codec)
            for delta, (key, value) in enumerate(pairs):
                expected[base + delta] = (key, value)
                if key is not None:
                    latest[key] = base + delta
        seal(log)
        cleaner = LogCleaner(keys_max=keys_max)

        def surviving(tombstones: bool) -> dict[int, tuple[bytes | None, bytes | None]]:
            return {
                offset: (key, value)
                for offset, (key, value) in expected.items()
                if key is None or (latest[key] == offset and (tombstones or value is not None))
            }

        def offsets_read() -> dict[int, tuple[bytes | None, bytes | None]]:
            return {r.offset: (r.key, r.value) for _, records in read_all(log) for r in records}

        for _ in range(40):  # a small key map needs several passes
            if cleaner.clean(log, NOW_MS) is None:
                break
        assert offsets_read() == surviving(tombstones=True)
        for _ in range(40):
            if cleaner.clean(log, NOW_MS + DAY_MS) is None:
                break
        assert offsets_read() == surviving(tombstones=False)
        crash(log)
        log = PartitionLog.open(Path(tmp) / "t-0", config, GroupFlusher())
        assert offsets_read() == surviving(tombstones=False)
        log.close()


async def test_background_pass_is_dropped_if_the_log_changes_after_its_manifest(
    open_log: OpenLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The manifest is committed on a worker thread; DeleteRecords may move the log
    meanwhile. The pass must then be taken back durably: nothing moves, and a
    restart does not roll the stale pass forward."""
    import weir.log.compaction as compaction

    log = open_log(**COMPACTED)
    write_updates(log, keys=4, rounds=6)
    first_segment_end = log.segments[1].base_offset
    commit_manifest = compaction._commit_manifest

    def commit_then_delete_records(directory: Path, entries: object) -> None:
        commit_manifest(directory, entries)  # type: ignore[arg-type]
        trio.from_thread.run_sync(log.delete_records_before, first_segment_end)

    monkeypatch.setattr(compaction, "_commit_manifest", commit_then_delete_records)
    before = read_all(log)
    assert await LogCleaner().clean_in_background(log, NOW_MS) is None
    assert not (log.directory / compaction.CLEANING_DIRECTORY_NAME).exists()
    assert [h.base_offset for h, _ in read_all(log)] == [
        h.base_offset for h, _ in before if h.base_offset >= first_segment_end
    ]
    log.close()
    reopened = open_log(**COMPACTED)
    assert reopened.log_start_offset == first_segment_end
    assert [h.base_offset for h, _ in read_all(reopened)] == [
        h.base_offset for h, _ in before if h.base_offset >= first_segment_end
    ]
