"""The aborted-transaction index (`.txnindex`): Kafka's 34-byte entries, the
overlap search a read_committed Fetch makes, truncation and recovery."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from weir.log import transaction_index
from weir.log.transaction_index import (
    ABORTED_TXN_BYTES,
    AbortedTxn,
    TransactionIndex,
    TransactionIndexCorrupt,
    collect_aborted_txns,
    decode_aborted_txns,
)


@pytest.fixture
def index(tmp_path: Path) -> TransactionIndex:
    return TransactionIndex(tmp_path / "00000000000000000000.txnindex", 0)


def test_entry_is_kafkas_abortedtxn_layout_byte_for_byte() -> None:
    entry = AbortedTxn(producer_id=0x0102030405060708, first_offset=10, last_offset=20,
                       last_stable_offset=21)  # fmt: skip
    assert entry.encode() == (
        b"\x00\x00"  # version 0
        + bytes(range(1, 9))  # producer id
        + (10).to_bytes(8, "big")
        + (20).to_bytes(8, "big")
        + (21).to_bytes(8, "big")
    )
    assert len(entry.encode()) == ABORTED_TXN_BYTES == 34
    assert decode_aborted_txns(entry.encode()) == [entry]


def test_decoding_refuses_a_partial_entry_and_an_unknown_version() -> None:
    data = AbortedTxn(1, 2, 3, 4).encode()
    with pytest.raises(TransactionIndexCorrupt, match="whole number"):
        decode_aborted_txns(data[:-1])
    with pytest.raises(TransactionIndexCorrupt, match="version 1"):
        decode_aborted_txns(b"\x00\x01" + data[2:])


def test_a_new_index_has_no_file_until_the_first_append(index: TransactionIndex) -> None:
    assert not index.path.exists()
    assert len(index) == 0 and index.last_offset is None
    assert index.collect(0, 100).aborted == []
    index.truncate_to(0)
    index.reset()
    index.sync()
    assert not index.path.exists()
    index.append(AbortedTxn(7, 0, 5, 6))
    assert index.path.stat().st_size == ABORTED_TXN_BYTES


def test_appended_entries_read_back_in_order_and_survive_reopening(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000100.txnindex"
    index = TransactionIndex(path, 100)
    entries = [AbortedTxn(pid, 90 + pid, 100 + 10 * pid, 101 + 10 * pid) for pid in range(5)]
    for entry in entries:
        index.append(entry)
    assert list(index.entries()) == entries
    reopened = TransactionIndex(path, 100)
    assert list(reopened.entries()) == entries
    assert len(reopened) == 5 and reopened.last_offset == 140
    reopened.sanity_check()


def test_markers_must_strictly_increase(index: TransactionIndex) -> None:
    index.append(AbortedTxn(1, 0, 10, 11))
    with pytest.raises(ValueError, match="not after"):
        index.append(AbortedTxn(2, 5, 10, 11))
    assert len(index) == 1


def test_a_marker_below_the_segment_base_is_refused(tmp_path: Path) -> None:
    index = TransactionIndex(tmp_path / "x.txnindex", 50)
    with pytest.raises(ValueError, match="below the segment base"):
        index.append(AbortedTxn(1, 0, 49, 50))


def test_collect_returns_transactions_overlapping_the_fetch_range() -> None:
    entries = [
        AbortedTxn(1, 0, 9, 0),  # ends before the fetch
        AbortedTxn(2, 5, 10, 0),  # marker at the fetch start: overlaps
        AbortedTxn(3, 15, 20, 0),  # inside
        AbortedTxn(4, 29, 40, 0),  # starts just below the upper bound: overlaps
        AbortedTxn(5, 30, 50, 0),  # starts at the upper bound: outside
    ]
    result = collect_aborted_txns(entries, 10, 30)
    assert [e.producer_id for e in result.aborted] == [2, 3, 4]
    assert not result.complete


def test_collect_stops_at_an_entry_whose_last_stable_offset_reaches_the_bound() -> None:
    """Kafka's early stop: once an aborted transaction completed with the LSO at or
    past the fetch's upper bound, no later entry (here or in a later segment)
    can start below it."""
    entries = [AbortedTxn(1, 0, 10, 11), AbortedTxn(2, 5, 20, 30), AbortedTxn(3, 25, 40, 41)]
    result = collect_aborted_txns(entries, 0, 30)
    assert [e.producer_id for e in result.aborted] == [1, 2]
    assert result.complete


def test_the_file_search_matches_the_pure_one_across_read_chunks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(transaction_index, "READ_CHUNK_ENTRIES", 3)
    index = TransactionIndex(tmp_path / "t.txnindex", 0)
    entries = [AbortedTxn(i, 10 * i, 10 * i + 5, 10 * i + 6) for i in range(10)]
    for entry in entries:
        index.append(entry)
    assert list(index.entries()) == entries
    for start, end in [(0, 100), (12, 47), (55, 56), (96, 200)]:
        assert index.collect(start, end) == collect_aborted_txns(entries, start, end)


def test_a_search_reads_only_from_the_first_marker_at_or_past_the_fetch_offset(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A read_committed fetch near the log end must not decode the whole index (it
    did: 1.9x read_uncommitted's broker CPU, BENCHMARKS.md); appends and truncation
    keep the bisection's marker offsets true."""
    monkeypatch.setattr(transaction_index, "READ_CHUNK_ENTRIES", 4)
    index = TransactionIndex(tmp_path / "t.txnindex", 0)
    entries = [AbortedTxn(i, 10 * i, 10 * i + 5, 10 * i + 6) for i in range(40)]
    for entry in entries[:30]:
        index.append(entry)
    assert index.collect(100, 300) == collect_aborted_txns(entries[:30], 100, 300)
    for entry in entries[30:]:
        index.append(entry)  # the marker offsets follow appends
    decoded: list[int] = []
    real_decode = transaction_index.decode_aborted_txns

    def counting(data: bytes | bytearray | memoryview) -> list[AbortedTxn]:
        found = real_decode(data)
        decoded.extend(e.last_offset for e in found)
        return found

    monkeypatch.setattr(transaction_index, "decode_aborted_txns", counting)
    read: list[int] = []
    real_pread = index._pread

    def reading(size_bytes: int, position: int) -> bytes:
        read.append(position)
        return real_pread(size_bytes, position)

    monkeypatch.setattr(index, "_pread", reading)
    monkeypatch.setattr(transaction_index, "SEARCH_CHUNK_ENTRIES", 2)
    assert index.collect(352, 358) == collect_aborted_txns(entries, 352, 358)
    # from marker 355's entry (35) on, and only until an entry's LSO passes 358
    assert read == [35 * ABORTED_TXN_BYTES] and decoded == []
    read.clear()
    assert index.collect(396, 500) == collect_aborted_txns(entries, 396, 500)
    assert index.collect(1_000, 2_000).aborted == [] and read == []  # past the last
    index.truncate_to(200)  # markers 205.. go, and the bisection follows
    assert index.collect(100, 300) == collect_aborted_txns(entries[:20], 100, 300)


def test_truncate_to_drops_entries_with_a_marker_at_or_after_the_offset(
    index: TransactionIndex,
) -> None:
    for i in range(4):
        index.append(AbortedTxn(i, 10 * i, 10 * i + 5, 10 * i + 6))  # markers 5, 15, 25, 35
    index.truncate_to(25)
    assert [e.last_offset for e in index.entries()] == [5, 15]
    assert index.last_offset == 15
    assert index.path.stat().st_size == 2 * ABORTED_TXN_BYTES
    index.append(AbortedTxn(9, 20, 22, 23))  # a new marker above the cut is accepted
    index.truncate_to(100)  # nothing at or past 100
    assert len(index) == 3
    index.truncate_to(0)
    assert len(index) == 0 and index.last_offset is None


def test_reset_empties_the_index(index: TransactionIndex) -> None:
    index.append(AbortedTxn(1, 0, 3, 4))
    index.reset()
    assert list(index.entries()) == [] and index.last_offset is None
    index.append(AbortedTxn(1, 0, 1, 2))  # may start again below the old last marker
    assert len(index) == 1


def test_a_torn_trailing_entry_is_cut_when_opened(tmp_path: Path) -> None:
    path = tmp_path / "t.txnindex"
    good = [AbortedTxn(1, 0, 5, 6), AbortedTxn(2, 3, 8, 9)]
    path.write_bytes(b"".join(e.encode() for e in good) + AbortedTxn(3, 9, 12, 13).encode()[:20])
    index = TransactionIndex(path, 0)
    assert list(index.entries()) == good
    assert path.stat().st_size == 2 * ABORTED_TXN_BYTES
    index.append(AbortedTxn(3, 9, 12, 13))  # aligned after the cut
    assert [e.producer_id for e in TransactionIndex(path, 0).entries()] == [1, 2, 3]


@pytest.mark.parametrize(
    "entries",
    [
        [AbortedTxn(1, 90, 99, 100)],  # marker below the segment base 100
        [AbortedTxn(1, 100, 110, 111), AbortedTxn(2, 100, 105, 111)],  # markers out of order
        [AbortedTxn(1, 120, 110, 111)],  # starts after its marker
    ],
)
def test_sanity_check_finds_an_index_recovery_cannot_trust(
    tmp_path: Path, entries: list[AbortedTxn]
) -> None:
    path = tmp_path / "t.txnindex"
    path.write_bytes(b"".join(e.encode() for e in entries))
    with pytest.raises(TransactionIndexCorrupt):
        TransactionIndex(path, 100).sanity_check()


def test_sanity_check_finds_an_unknown_version(tmp_path: Path) -> None:
    path = tmp_path / "t.txnindex"
    path.write_bytes(struct.pack(">hqqqq", 7, 1, 100, 101, 102))
    index = TransactionIndex(path, 100)
    assert index.last_offset == 101
    with pytest.raises(TransactionIndexCorrupt, match="version 7"):
        index.sanity_check()


def test_reads_never_allocate_more_than_a_chunk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """However large the file, a read asks for at most one chunk of entries."""
    path = tmp_path / "t.txnindex"
    path.write_bytes(b"".join(AbortedTxn(i, i, i, i + 1).encode() for i in range(2500)))
    index = TransactionIndex(path, 0)
    sizes: list[int] = []
    real_pread = transaction_index.os.pread

    def recording_pread(fd: int, size: int, position: int) -> bytes:
        sizes.append(size)
        return real_pread(fd, size, position)

    monkeypatch.setattr(transaction_index.os, "pread", recording_pread)
    assert sum(1 for _ in index.entries()) == 2500
    assert max(sizes) <= transaction_index.READ_CHUNK_ENTRIES * ABORTED_TXN_BYTES


def test_delete_removes_the_file(index: TransactionIndex) -> None:
    index.append(AbortedTxn(1, 0, 3, 4))
    index.sync()
    index.delete()
    assert not index.path.exists() and len(index) == 0
