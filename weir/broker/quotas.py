"""Client quota enforcement: what each request is measured on, and its throttle.

The rules are Kafka's (`weir.security.quotas`); this is the broker's side of them.
`QuotaManager` (`broker.quotas`) follows the client quotas in the metadata (saved here
or taken from another broker's document: it notices the stored mapping being replaced,
an identity check per request) and holds one `ClientQuotas` per quota type. With no
quota configured, `for_request` answers None after that one check: nothing is
measured and the request path is unchanged.

With quotas, the dispatcher (`weir.broker.server.dispatch`, the one place) gets a
`RequestQuota` per request from an authenticated connection and settles it once the
response body is known, as Kafka's `KafkaApis` does:

- Produce: the request's bytes on `producer_byte_rate`, and (unless acks=0) its time
  on `request_percentage`; the larger throttle is the response's `throttle_time_ms`.
- Fetch from a consumer: its `max_bytes` held to what the quota allows in its window;
  the response's bytes on `consumer_byte_rate` and its time on `request_percentage`;
  when either throttles, the records are not sent (an empty response carrying the
  throttle) and the bytes are taken back off the rate. A follower's fetch is exempt.
- Any other request: its time on `request_percentage`. Exempt: SASL (before a
  session), WriteTxnMarkers (a broker's), a follower's Fetch.

Then the connection is muted: its reader takes no further request until the throttle
has passed (KIP-219: the response leaves at once, carrying the throttle).

Request time: Kafka measures the time a request-handler thread spends on the request.
Weir's stand-in is the wall time the event loop spends on it before its response is
pending: decoding, authorization and the handler's immediate work, from the frame
taken to the handler's return. Waits (a produce's durability, a fetch's long poll)
and the work of a deferred response after its wait are not counted. One second of
handling is 100 (percent of one thread for a second).
"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from weir.broker.metrics import Metrics
from weir.security.principal import ANONYMOUS
from weir.security.quotas import ClientQuotas, QuotaType, quota_levels, strict_mutation_quota
from weir.wire.api_keys import ApiKey
from weir.wire.messages.fetch import FetchResponse
from weir.wire.messages.topics import (
    CreatePartitionsResponseResult,
    CreateTopicsResponseTopic,
    DeleteTopicsResponseResponse,
)
from weir.wire.protocol import RequestHeader, decode_response, encode_response

# A fetch from a consumer, not from a follower broker.
CONSUMER_REPLICA_ID = -1
FIRST_REPLICA_STATE_VERSION = 15
# Never throttled: a connection's SASL exchange, and what brokers send each other.
EXEMPT_APIS = frozenset({ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE, ApiKey.WRITE_TXN_MARKERS})
ZERO_UUID = uuid.UUID(int=0)
# One second of handling, as a request_percentage value.
PERCENT_PER_SECOND = 100.0


class _Metadata(Protocol):
    @property
    def client_quotas(self) -> Any: ...


class _Controller(Protocol):
    @property
    def metadata(self) -> _Metadata: ...


class _Session(Protocol):
    @property
    def principal(self) -> Any: ...


class _Connection(Protocol):
    session: Any
    throttled_until_s: float


def monotonic_ms() -> int:
    return int(time.monotonic() * 1000)


class QuotaManager:
    """The client quotas in force and their sensors; the throttle counters."""

    def __init__(self, controller: _Controller, metrics: Metrics) -> None:
        self._controller = controller
        self._source: object = None
        self._enabled = False
        self.quotas = {kind: ClientQuotas(kind, {}) for kind in QuotaType}
        self.throttle_ms_total: Counter[str] = Counter()
        self.throttled_total: Counter[str] = Counter()
        metrics.register_counter_family(
            "weir_quota_throttle_ms_total",
            "Milliseconds of throttle given to clients over a quota, by the quota that "
            "decided it (produce, fetch, request, controller_mutation).",
            "quota_type",
            lambda: self.throttle_ms_total,
        )
        metrics.register_counter_family(
            "weir_quota_throttled_responses_total",
            "Responses that carried a throttle time, by the quota that decided it.",
            "quota_type",
            lambda: self.throttled_total,
        )

    def enabled(self) -> bool:
        """Whether any client quota is configured (follows the metadata)."""
        stored = self._controller.metadata.client_quotas
        if stored is not self._source:
            self._follow(stored)
        return self._enabled

    def _follow(self, stored: Any) -> None:
        self._source = stored
        levels = quota_levels(stored)
        for kind, quotas in self.quotas.items():
            quotas.replace_levels(levels[kind])
        self._enabled = any(quotas.enabled for quotas in self.quotas.values())

    def for_request(
        self, header: RequestHeader, request: object, frame_bytes: int, connection: _Connection
    ) -> RequestQuota | None:
        """The request's quota bookkeeping; None when it is exempt (or nothing is
        configured: call `enabled` first on the hot path)."""
        api_key = header.api_key
        session = connection.session
        if api_key in EXEMPT_APIS or session is None:
            return None
        if api_key == ApiKey.FETCH and _replica_id(header, request) != CONSUMER_REPLICA_ID:
            return None
        principal = session.principal or ANONYMOUS
        quota = RequestQuota(self, header, principal.name, header.client_id or "", connection)
        if api_key == ApiKey.PRODUCE:
            quota.produce_bytes = frame_bytes
            quota.acks_zero = getattr(request, "acks", -1) == 0
        elif api_key == ApiKey.FETCH:
            quota.consumer_fetch = True
            _hold_fetch_to_quota(self.quotas[QuotaType.FETCH], quota, request)
        return quota

    def throttled(self, kind: QuotaType, throttle_ms: int) -> None:
        self.throttle_ms_total[kind.label] += throttle_ms
        self.throttled_total[kind.label] += 1


def _replica_id(header: RequestHeader, request: object) -> int:
    if header.api_version >= FIRST_REPLICA_STATE_VERSION:
        state = getattr(request, "replica_state", None)
        return CONSUMER_REPLICA_ID if state is None else int(state.replica_id)
    return int(getattr(request, "replica_id", CONSUMER_REPLICA_ID))


def _hold_fetch_to_quota(quotas: ClientQuotas, quota: RequestQuota, request: Any) -> None:
    """Kafka's fetch max bytes: no more than the quota allows in its window."""
    window_bytes = quotas.max_value_in_window(quota.user, quota.client_id)
    if window_bytes < request.max_bytes:
        request.max_bytes = int(window_bytes)
        request.min_bytes = min(request.min_bytes, request.max_bytes)


@dataclass(eq=False)
class RequestQuota:
    """One request's quota bookkeeping, from its frame to its response."""

    manager: QuotaManager
    header: RequestHeader
    user: str
    client_id: str
    connection: _Connection
    started_s: float = 0.0
    handled_s: float | None = None
    produce_bytes: int | None = None
    acks_zero: bool = False
    consumer_fetch: bool = False
    throttle_ms: int = 0
    # CreateTopics, CreatePartitions, DeleteTopics: controller_mutation_rate's throttle.
    mutation_throttle_ms: int = 0

    def __post_init__(self) -> None:
        self.started_s = time.perf_counter()

    def handler_returned(self) -> None:
        """The request's immediate work is done (what follows is a wait). All but a
        consumer's fetch are recorded now, so that the connection is muted before its
        next request is read (Kafka reads none until this one is answered)."""
        if self.handled_s is None:
            self.handled_s = time.perf_counter() - self.started_s
            if not self.consumer_fetch:
                self._record()

    def _request_percent(self) -> float:
        assert self.handled_s is not None
        return self.handled_s * PERCENT_PER_SECOND

    def _record(self) -> None:
        self.manager.enabled()  # a deferred answer may come after the quotas changed
        now_ms = monotonic_ms()
        quotas = self.manager.quotas
        produce_ms = request_ms = 0
        if self.produce_bytes is not None:
            produce_ms = quotas[QuotaType.PRODUCE].record(
                self.user, self.client_id, self.produce_bytes, now_ms
            )
        if not self.acks_zero:  # Kafka: an acks=0 produce is exempt from the request quota
            request_ms = quotas[QuotaType.REQUEST].record(
                self.user, self.client_id, self._request_percent(), now_ms
            )
        self.throttle_ms = max(produce_ms, request_ms, self.mutation_throttle_ms)
        if max(produce_ms, request_ms) > self.mutation_throttle_ms:
            self._mute(QuotaType.PRODUCE if produce_ms > request_ms else QuotaType.REQUEST)

    def mute_for_mutations(self) -> None:
        """controller_mutation_rate's throttle, known before the handler runs."""
        self.throttle_ms = self.mutation_throttle_ms
        self._mute(QuotaType.CONTROLLER_MUTATION)

    def settle(self, body: Any) -> Any:
        """`body` (None: no response is sent, acks=0) with the request's throttle
        time; the request is recorded first if it was not yet (an answer refused
        before its handler ran)."""
        self.handler_returned()
        if self.throttle_ms <= 0:
            return body
        return _with_throttle(self.header, body, self.throttle_ms)

    def settle_fetch(self, response_bytes: int) -> FetchResponse | None:
        """A consumer's fetch: record its response's bytes and time; when throttled,
        the response to send instead (no records, the throttle), else None."""
        self.handler_returned()
        self.manager.enabled()
        now_ms = monotonic_ms()
        fetch = self.manager.quotas[QuotaType.FETCH]
        request_ms = self.manager.quotas[QuotaType.REQUEST].record(
            self.user, self.client_id, self._request_percent(), now_ms
        )
        fetch_ms = fetch.record(self.user, self.client_id, response_bytes, now_ms)
        throttle_ms = max(request_ms, fetch_ms)
        if throttle_ms <= 0:
            return None
        fetch.unrecord(self.user, self.client_id, response_bytes, now_ms)
        self.throttle_ms = throttle_ms
        self._mute(QuotaType.FETCH if fetch_ms > request_ms else QuotaType.REQUEST)
        return FetchResponse(throttle_time_ms=throttle_ms, error_code=0, session_id=0)

    def _mute(self, kind: QuotaType) -> None:
        self.manager.throttled(kind, self.throttle_ms)
        until_s = time.monotonic() + self.throttle_ms / 1000
        if until_s > self.connection.throttled_until_s:
            self.connection.throttled_until_s = until_s


def _with_throttle(header: RequestHeader, body: Any, throttle_ms: int) -> Any:
    """`body` carrying the throttle: a typed response's field; a pre-encoded one
    (Produce's) decoded, set and encoded again (only when throttled)."""
    if body is None:
        return None
    frame = getattr(body, "frame", None)
    if isinstance(frame, bytes):
        _, decoded = decode_response(header.api_key, header.api_version, memoryview(frame)[4:])
        decoded.throttle_time_ms = throttle_ms
        return type(body)(
            encode_response(header.api_key, header.api_version, header.correlation_id, decoded)
        )
    if hasattr(body, "throttle_time_ms"):
        body.throttle_time_ms = throttle_ms
    return body


# -- controller_mutation_rate ---------------------------------------------------------

MUTATION_APIS = frozenset({ApiKey.CREATE_TOPICS, ApiKey.CREATE_PARTITIONS, ApiKey.DELETE_TOPICS})
THROTTLING_QUOTA_EXCEEDED = 89
THROTTLING_MESSAGE = "The throttling quota has been exceeded."
FIRST_DELETE_BY_ID_VERSION = 6


class _Topics(Protocol):
    def topic(self, name: str) -> Any: ...

    def topic_by_id(self, topic_id: Any) -> Any: ...


def limit_mutations(
    quota: RequestQuota, request: Any, topics: _Topics, default_partitions: int
) -> Callable[[Any], Any] | None:
    """CreateTopics, CreatePartitions, DeleteTopics under `controller_mutation_rate`:
    each topic's partitions charged in turn (only a topic the request would change:
    Weir charges before its handler validates, Kafka after); a topic refused by a
    strict quota leaves the request and is answered THROTTLING_QUOTA_EXCEEDED by the
    returned `complete`. None when nothing was refused."""
    mutations = quota.manager.quotas[QuotaType.CONTROLLER_MUTATION]
    if not mutations.enabled:
        return None
    api = ApiKey(quota.header.api_key)
    strict = strict_mutation_quota(api.name, quota.header.api_version)
    now_ms = monotonic_ms()

    def allowed(partitions: int) -> bool:
        if partitions <= 0:
            return True  # nothing to change: the handler answers it
        decision = mutations.record_mutation(
            quota.user, quota.client_id, partitions, strict, now_ms
        )
        quota.mutation_throttle_ms = max(quota.mutation_throttle_ms, decision.throttle_time_ms)
        return decision.accepted

    refused: list[Any]
    if api == ApiKey.CREATE_TOPICS:
        kept = [t for t in request.topics if allowed(_created(t, topics, default_partitions))]
        refused = [t.name for t in request.topics if t not in kept]
        request.topics = kept
    elif api == ApiKey.CREATE_PARTITIONS:
        kept = [t for t in request.topics if allowed(_added(t, topics))]
        refused = [t.name for t in request.topics if t not in kept]
        request.topics = kept
    elif quota.header.api_version >= FIRST_DELETE_BY_ID_VERSION:
        kept = [t for t in request.topics if allowed(_deleted(topics, t.name, t.topic_id))]
        refused = [t for t in request.topics if t not in kept]
        request.topics = kept
    else:
        kept = [n for n in request.topic_names if allowed(_deleted(topics, n, None))]
        refused = [n for n in request.topic_names if n not in kept]
        request.topic_names = kept
    if quota.mutation_throttle_ms > 0:
        quota.mute_for_mutations()
    if not refused:
        return None
    return lambda response: _add_refused(api, response, refused)


def _created(topic: Any, topics: _Topics, default_partitions: int) -> int:
    if not topic.name or topics.topic(topic.name) is not None:
        return 0
    if topic.assignments:
        return len(topic.assignments)
    return topic.num_partitions if topic.num_partitions > 0 else default_partitions


def _added(topic: Any, topics: _Topics) -> int:
    record = topics.topic(topic.name)
    return 0 if record is None else max(topic.count - record.partition_count, 0)


def _deleted(topics: _Topics, name: str | None, topic_id: Any) -> int:
    record = topics.topic(name) if name else topics.topic_by_id(topic_id)
    return 0 if record is None else int(record.partition_count)


def _add_refused(api: ApiKey, response: Any, refused: list[Any]) -> Any:
    if response is None:
        return None
    if api == ApiKey.CREATE_TOPICS:
        response.topics.extend(
            CreateTopicsResponseTopic(
                name=name, error_code=THROTTLING_QUOTA_EXCEEDED, error_message=THROTTLING_MESSAGE
            )
            for name in refused
        )
    elif api == ApiKey.CREATE_PARTITIONS:
        response.results.extend(
            CreatePartitionsResponseResult(
                name=name, error_code=THROTTLING_QUOTA_EXCEEDED, error_message=THROTTLING_MESSAGE
            )
            for name in refused
        )
    else:
        response.responses.extend(
            DeleteTopicsResponseResponse(
                name=item if isinstance(item, str) else item.name,
                topic_id=getattr(item, "topic_id", ZERO_UUID),
                error_code=THROTTLING_QUOTA_EXCEEDED,
                error_message=THROTTLING_MESSAGE,
            )
            for item in refused
        )
    return response
