"""The contract between the scenarios and the per-client driver processes.

A driver reads one JSON object (`DriverSpec.to_json`) on stdin, consumes in explicit
acknowledgement mode, and prints one JSON object per line on stdout, flushed at once:

- ``{"event": "started", "client": NAME}``
- ``{"event": "delivered", "topic", "partition", "offset", "key", "value",
  "delivery_count"}``: a record poll() returned (key/value as UTF-8 text or null)
- ``{"event": "acknowledge", "topic", "partition", "offset", "type"}``: the driver
  acknowledged it locally (ACCEPT, RELEASE, REJECT or RENEW)
- ``{"event": "ack_result", "topic", "partition", "offsets": [...], "error": NAME|null}``:
  the client's acknowledgement-commit callback (franz-go reports a partition without
  offsets: ``"offsets": null``)
- ``{"event": "commit", "results": [{"topic", "partition", "error"}]}``: what a
  synchronous commit returned
- ``{"event": "error", "where": "poll"|"acknowledge"|"commit"|"close", "error": NAME,
  "message": TEXT}``: an exception the client raised
- ``{"event": "holding"}``: a HOLD action: the driver stops polling and acknowledging and
  sleeps until its deadline (or until it is killed)
- ``{"event": "unsupported", "what": TEXT}``: the client cannot do what the spec asks
  (then it exits with code 3)
- ``{"event": "closed"}``

Every event also has ``"t_ms"`` (wall clock, epoch milliseconds) and ``"consumer"`` (the
spec's `client_id`). Error names are Kafka's protocol error names (INVALID_RECORD_STATE).

With `ordered_by_key` (the Python driver), once a poll's record is released, the
poll's later records with the same key are released too, whatever their action: a
consumer of a group with `weir.share.key.ordering.enable` that gives a record back
gives back what follows it in its key.

Actions: the n-th time this consumer sees a record (`actions["P:O"][n-1]`, the last
entry repeating; `default_action` for a record not listed) it acknowledges it with that
type, or HOLDs it. `value_actions` does the same by the record's value: a record not in
`actions` whose value's part before the first "/" is listed (``"reject"`` for a value
``"reject/17"``) gets `value_actions[prefix][n-1]` on its n-th sighting (the Python
driver reads it; the Java and Go drivers ignore fields they do not know). After
acknowledging a poll's records the driver commits the acknowledgements: `commit` =
"sync" (commitSync), "async" (commitAsync) or "poll" (piggy-backed on the next poll's
ShareFetch).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

ACK_TYPES = ("ACCEPT", "RELEASE", "REJECT", "RENEW")
HOLD = "HOLD"
ACTIONS = (*ACK_TYPES, HOLD)
COMMIT_MODES = ("sync", "async", "poll")
UNSUPPORTED_EXIT_CODE = 3


@dataclass
class DriverSpec:
    bootstrap: str
    group: str
    topics: list[str]
    client_id: str
    actions: dict[str, list[str]] = field(default_factory=dict)
    default_action: str = "ACCEPT"
    # by the value's part before the first "/" (for a record not in `actions`)
    value_actions: dict[str, list[str]] = field(default_factory=dict)
    # after a poll returned records, wait this long before acknowledging them
    pause_ms: int = 0
    commit: str = "sync"
    # exit (commit, close) once this many deliveries were seen; 0: no limit
    max_deliveries: int = 0
    # after the first delivery, exit when nothing was delivered for this long
    idle_ms: int = 3000
    # exit no later than this after starting
    deadline_ms: int = 30000
    poll_ms: int = 200
    # share.acquire.mode / max.poll.records; "" and 0 leave the client's defaults
    acquire_mode: str = ""
    max_poll_records: int = 0
    # the client's protocol debug logging on stderr
    debug: bool = False
    # an ordered consumer (per-key ordering): once it releases a record of a key, it
    # releases the poll's later records of that key too (the Python driver reads it)
    ordered_by_key: bool = False

    def __post_init__(self) -> None:
        listed = [*self.actions.values(), *self.value_actions.values()]
        for action in [self.default_action, *(a for v in listed for a in v)]:
            if action not in ACTIONS:
                raise ValueError(f"unknown action {action!r}: one of {ACTIONS}")
        if self.commit not in COMMIT_MODES:
            raise ValueError(f"unknown commit mode {self.commit!r}: one of {COMMIT_MODES}")

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> DriverSpec:
        data: dict[str, Any] = json.loads(text)
        return cls(**data)

    def action_for(
        self, partition: int, offset: int, sighting: int, value: str | None = None
    ) -> str:
        """The action for the `sighting`-th (1-based) time this consumer sees a record
        (whose value is `value`)."""
        listed = self.actions.get(f"{partition}:{offset}")
        if not listed and value is not None and self.value_actions:
            listed = self.value_actions.get(value.split("/", 1)[0])
        if not listed:
            return self.default_action
        return listed[min(sighting, len(listed)) - 1]
