"""The counts a share-group description shows for a share partition led elsewhere,
from its stored state (weir.broker.http.share_stored_view.stored_summary)."""

from __future__ import annotations

from weir.broker.http.share_stored_view import stored_summary
from weir.sharecoord.share_state import RecordState, ShareState, StateBatch

NOW_MS = 1_000_000


def state(*batches: StateBatch, start_offset: int = 10) -> ShareState:
    return ShareState(start_offset=start_offset, state_epoch=0, leader_epoch=1, batches=batches)


def test_records_no_batch_covers_up_to_the_end_were_never_delivered() -> None:
    summary = stored_summary(state(), end_offset=15, now_ms=NOW_MS)
    assert summary == {
        "not_finished": 5,
        "acknowledged": 0,
        "archived": 0,
        "delayed": 0,
        "delivery_counts": {"0": 5},
    }


def test_done_records_are_counted_apart_and_the_rest_by_delivery_count() -> None:
    summary = stored_summary(
        state(
            StateBatch(10, 11, RecordState.ACKNOWLEDGED, 1),
            StateBatch(12, 12, RecordState.ARCHIVED, 5),
            StateBatch(13, 13, RecordState.ARCHIVING, 2),
            StateBatch(14, 16, RecordState.AVAILABLE, 1),  # acquired or released once
            StateBatch(17, 17, RecordState.AVAILABLE, 3, visible_ms=NOW_MS + 500),
            StateBatch(18, 18, RecordState.AVAILABLE, 2, visible_ms=NOW_MS - 500),
        ),
        end_offset=22,
        now_ms=NOW_MS,
    )
    assert (summary["acknowledged"], summary["archived"], summary["delayed"]) == (2, 2, 1)
    assert summary["delivery_counts"] == {"0": 3, "1": 3, "2": 1, "3": 1}
    assert summary["not_finished"] == 8


def test_an_unknown_end_counts_to_the_end_of_the_stored_state() -> None:
    summary = stored_summary(
        state(StateBatch(12, 12, RecordState.AVAILABLE, 1)), end_offset=None, now_ms=NOW_MS
    )
    assert summary["delivery_counts"] == {"0": 2, "1": 1}
