"""Client quotas as Kafka enforces them (`ClientQuotaManager` and its subclasses), pure:
time is `now_ms`, and nothing here sleeps or mutes a connection.

Which quota applies. A quota key (`producer_byte_rate`, `consumer_byte_rate`,
`request_percentage`, `controller_mutation_rate`) is looked up for a (user, client id)
pair through eight levels, the first one configured for that key winning:

    1. user=<user>, client-id=<client-id>
    2. user=<user>, client-id=<default>
    3. user=<user>
    4. user=<default>, client-id=<client-id>
    5. user=<default>, client-id=<default>
    6. user=<default>
    7. client-id=<client-id>
    8. client-id=<default>

The level found names the *sensor* the pair is measured on (Kafka's metric tags, here
`SensorKey`): `(user, client id)` for levels 1, 2, 4, 5; `(user, "")` for 3 and 6, so
every client id of the user shares one rate; `("", client id)` for 7 and 8. The limit
is then looked up from the sensor key (`limit_for`), as Kafka's `quotaLimit` does.
An entity part is a name, `DEFAULT` (None: `<default>`) or `ABSENT` ("": the entity
has no such part; Kafka's empty tag).

How a rate is measured (`WindowedRate`, Kafka's `Rate` over a `WindowedSum`): samples
of `QUOTA_WINDOW_SIZE_MS` (`quota.window.size.seconds` 1), at most
`QUOTA_WINDOW_COUNT` (`quota.window.num` 11) of them, plus one that may overlap the
oldest edge; a sample idle for the whole span is reset. The rate is the samples' sum
over the elapsed time since the oldest sample began, counted as at least
`count - 1` whole windows (so a client's first second is not measured over a few ms).

The throttle (Kafka's `QuotaUtils.throttleTime`): with O the measured rate and T the
quota over a window W, the time X such that O * W / (W + X) = T: X = (O - T) / T * W,
rounded as Java's `Math.round`. A `request_percentage` throttle is capped at one
window (`ClientRequestQuotaManager`).

`controller_mutation_rate` is a token bucket (Kafka's `TokenBucket`): it refills at the
quota per second up to a burst of quota * count * window, and a mutation is refused
(THROTTLING_QUOTA_EXCEEDED, strict: CreateTopics v6+, CreatePartitions v3+,
DeleteTopics v5+) while the bucket is below zero; one mutation may overdraw it. The
throttle is the time to refill to zero: -tokens / quota * 1000. Earlier versions are
permissive: every mutation is accepted, the throttle still applies.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Final

QUOTA_WINDOW_COUNT: Final = 11
QUOTA_WINDOW_SIZE_MS: Final = 1000
# Kafka purges a client's sensors after an hour without a recording.
INACTIVE_SENSOR_EXPIRATION_MS: Final = 3_600_000
# How often the inactive sensors are looked for (Kafka's ExpireSensorTask: 30 s).
SENSOR_SWEEP_INTERVAL_MS: Final = 30_000
# At most this many sensors per quota type; the least recently used goes first.
SENSORS_MAX: Final = 10_000

USER: Final = "user"
CLIENT_ID: Final = "client-id"
# An entity part: a name, DEFAULT (`<default>`) or ABSENT (the entity has no such part).
DEFAULT: Final = None
ABSENT: Final = ""

EntityPart = str | None
# (user part, client-id part), as the levels above name them.
EntityKey = tuple[EntityPart, EntityPart]
# The rate a request is measured on: (user or "", client id or "").
SensorKey = tuple[str, str]


class QuotaType(Enum):
    """A quota key and the quota manager that enforces it."""

    PRODUCE = "producer_byte_rate"
    FETCH = "consumer_byte_rate"
    REQUEST = "request_percentage"
    CONTROLLER_MUTATION = "controller_mutation_rate"

    @property
    def label(self) -> str:
        """Kafka's QuotaType name (metrics)."""
        return _LABELS[self]


_LABELS = {
    QuotaType.PRODUCE: "produce",
    QuotaType.FETCH: "fetch",
    QuotaType.REQUEST: "request",
    QuotaType.CONTROLLER_MUTATION: "controller_mutation",
}


def quota_levels(
    stored: Mapping[tuple[tuple[str, str | None], ...], Mapping[str, float]],
) -> dict[QuotaType, dict[EntityKey, float]]:
    """The stored client quotas (entity -> key -> value, an entity as sorted
    (type, name) pairs, name None for `<default>`) as each quota type's levels.
    Entities naming an IP (connection quotas) are not client quotas: left out."""
    levels: dict[QuotaType, dict[EntityKey, float]] = {kind: {} for kind in QuotaType}
    for entity, values in stored.items():
        parts = dict(entity)
        if set(parts) - {USER, CLIENT_ID}:
            continue
        key = (parts.get(USER, ABSENT), parts.get(CLIENT_ID, ABSENT))
        for name, value in values.items():
            try:
                levels[QuotaType(name)][key] = value
            except ValueError:
                continue
    return levels


def sensor_key(levels: Mapping[EntityKey, float], user: str, client_id: str) -> SensorKey:
    """The sensor a (user, client id) pair is measured on: the first level configured."""
    if (user, client_id) in levels or (user, DEFAULT) in levels:
        return (user, client_id)
    if (user, ABSENT) in levels:
        return (user, ABSENT)
    if (DEFAULT, client_id) in levels or (DEFAULT, DEFAULT) in levels:
        return (user, client_id)
    if (DEFAULT, ABSENT) in levels:
        return (user, ABSENT)
    return (ABSENT, client_id)


def limit_for(levels: Mapping[EntityKey, float], key: SensorKey) -> float | None:
    """The quota of a sensor; None: unlimited."""
    user, client_id = key
    if user and client_id:
        candidates: tuple[EntityKey, ...] = (
            (user, client_id),
            (user, DEFAULT),
            (DEFAULT, client_id),
            (DEFAULT, DEFAULT),
        )
    elif user:
        candidates = ((user, ABSENT), (DEFAULT, ABSENT))
    elif client_id:
        candidates = ((ABSENT, client_id), (ABSENT, DEFAULT))
    else:
        return None
    for candidate in candidates:
        limit = levels.get(candidate)
        if limit is not None:
            return limit
    return None


def java_round(value: float) -> int:
    """Java's Math.round: half up."""
    return math.floor(value + 0.5)


class _Sample:
    __slots__ = ("last_event_ms", "start_ms", "value")

    def __init__(self, now_ms: int) -> None:
        self.start_ms = now_ms
        self.last_event_ms = now_ms
        self.value = 0.0

    def reset(self, now_ms: int) -> None:
        self.start_ms = now_ms
        self.last_event_ms = now_ms
        self.value = 0.0


class WindowedRate:
    """Kafka's `Rate` (per second) over a `WindowedSum`: see the module's docstring."""

    __slots__ = ("_current", "_samples", "count", "window_ms")

    def __init__(self, count: int = QUOTA_WINDOW_COUNT, window_ms: int = QUOTA_WINDOW_SIZE_MS):
        self.count = count
        self.window_ms = window_ms
        self._samples: list[_Sample] = []
        self._current = 0

    def record(self, value: float, now_ms: int) -> None:
        sample = self._current_sample(now_ms)
        if now_ms - sample.start_ms >= self.window_ms:
            sample = self._advance(now_ms)
        sample.value += value
        sample.last_event_ms = now_ms

    def _current_sample(self, now_ms: int) -> _Sample:
        if not self._samples:
            self._samples.append(_Sample(now_ms))
        return self._samples[self._current]

    def _advance(self, now_ms: int) -> _Sample:
        # One sample more than the count: the one overlapping the window's start.
        self._current = (self._current + 1) % (self.count + 1)
        if self._current >= len(self._samples):
            sample = _Sample(now_ms)
            self._samples.append(sample)
            return sample
        sample = self._samples[self._current]
        sample.reset(now_ms)
        return sample

    def _purge(self, now_ms: int) -> None:
        expire_age_ms = self.count * self.window_ms
        for sample in self._samples:
            if now_ms - sample.last_event_ms >= expire_age_ms:
                sample.reset(now_ms)

    def window_size_ms(self, now_ms: int) -> int:
        """The time the rate is measured over: since the oldest sample began, at
        least `count - 1` whole windows, at least 1 ms."""
        self._purge(now_ms)
        if not self._samples:
            self._samples.append(_Sample(now_ms))
        oldest_ms = min(sample.start_ms for sample in self._samples)
        elapsed_ms = now_ms - oldest_ms
        full_windows = elapsed_ms // self.window_ms
        if full_windows < self.count - 1:
            elapsed_ms += (self.count - 1 - full_windows) * self.window_ms
        return max(elapsed_ms, 1)

    def total(self, now_ms: int) -> float:
        self._purge(now_ms)
        return sum(sample.value for sample in self._samples)

    def measure(self, now_ms: int) -> float:
        """The rate per second."""
        total = self.total(now_ms)
        return total / (self.window_size_ms(now_ms) / 1000)

    def throttle_time_ms(self, limit: float, now_ms: int) -> int:
        """How long the client must wait for the rate to come back to `limit`
        (0 when within it): (O - T) / T * W."""
        rate = self.measure(now_ms)
        if rate <= limit:
            return 0
        return java_round((rate - limit) / limit * self.window_size_ms(now_ms))


class TokenBucket:
    """Kafka's `TokenBucket`: starts full; see the module's docstring."""

    __slots__ = ("_last_update_ms", "tokens")

    def __init__(self) -> None:
        self.tokens = math.inf
        self._last_update_ms = 0

    @staticmethod
    def burst(limit: float) -> float:
        return QUOTA_WINDOW_COUNT * (QUOTA_WINDOW_SIZE_MS / 1000) * limit

    def _refill(self, limit: float, now_ms: int) -> None:
        burst = self.burst(limit)
        elapsed_s = (now_ms - self._last_update_ms) / 1000
        self.tokens = min(burst, self.tokens + limit * elapsed_s)
        self._last_update_ms = now_ms

    def measure(self, limit: float, now_ms: int) -> float:
        self._refill(limit, now_ms)
        return self.tokens

    def record(self, value: float, limit: float, now_ms: int) -> None:
        self._refill(limit, now_ms)
        self.tokens = min(self.burst(limit), self.tokens - value)

    def throttle_time_ms(self, limit: float, now_ms: int) -> int:
        """The time to refill to zero; 0 when the bucket is not below zero."""
        tokens = self.measure(limit, now_ms)
        if tokens >= 0:
            return 0
        return java_round(-tokens / limit * 1000)


class _Sensor:
    __slots__ = ("bucket", "last_record_ms", "rate")

    def __init__(self, now_ms: int) -> None:
        self.rate = WindowedRate()
        self.bucket = TokenBucket()
        self.last_record_ms = now_ms


@dataclass(frozen=True, slots=True)
class MutationDecision:
    """A controller mutation's answer: accepted or refused (THROTTLING_QUOTA_EXCEEDED),
    and the throttle time the response carries."""

    accepted: bool
    throttle_time_ms: int


class ClientQuotas:
    """One quota type's levels and its sensors, bounded: a sensor idle for an hour is
    dropped, and past `sensors_max` the least recently used is."""

    def __init__(
        self,
        kind: QuotaType,
        levels: Mapping[EntityKey, float],
        sensors_max: int = SENSORS_MAX,
        expiration_ms: int = INACTIVE_SENSOR_EXPIRATION_MS,
    ) -> None:
        self.kind = kind
        self.levels: Mapping[EntityKey, float] = dict(levels)
        self.sensors_max = sensors_max
        self.expiration_ms = expiration_ms
        self._sensors: OrderedDict[SensorKey, _Sensor] = OrderedDict()
        self._next_sweep_ms: int | None = None

    @property
    def enabled(self) -> bool:
        return bool(self.levels)

    def replace_levels(self, levels: Mapping[EntityKey, float]) -> None:
        """The quotas changed; the sensors keep what they measured (Kafka changes a
        live sensor's bound, not its samples)."""
        self.levels = dict(levels)

    def sensor_count(self) -> int:
        return len(self._sensors)

    def limit(self, user: str, client_id: str) -> float | None:
        return limit_for(self.levels, sensor_key(self.levels, user, client_id))

    def _sensor(self, key: SensorKey, now_ms: int) -> _Sensor:
        self._sweep(now_ms)
        sensor = self._sensors.get(key)
        if sensor is None:
            sensor = _Sensor(now_ms)
            self._sensors[key] = sensor
            while len(self._sensors) > self.sensors_max:
                self._sensors.popitem(last=False)
        else:
            self._sensors.move_to_end(key)
        sensor.last_record_ms = now_ms
        return sensor

    def _sweep(self, now_ms: int) -> None:
        if self._next_sweep_ms is not None and now_ms < self._next_sweep_ms:
            return
        self._next_sweep_ms = now_ms + SENSOR_SWEEP_INTERVAL_MS
        idle = [
            key
            for key, sensor in self._sensors.items()
            if now_ms - sensor.last_record_ms >= self.expiration_ms
        ]
        for key in idle:
            del self._sensors[key]

    def record(self, user: str, client_id: str, value: float, now_ms: int) -> int:
        """Record `value` for the pair; the throttle time in ms (0: within its quota).
        Kafka's `recordAndGetThrottleTimeMs`: record, then check."""
        key = sensor_key(self.levels, user, client_id)
        limit = limit_for(self.levels, key)
        sensor = self._sensor(key, now_ms)
        sensor.rate.record(value, now_ms)
        if limit is None:
            return 0
        throttle_ms = sensor.rate.throttle_time_ms(limit, now_ms)
        if self.kind is QuotaType.REQUEST:
            throttle_ms = min(throttle_ms, QUOTA_WINDOW_SIZE_MS)
        return throttle_ms

    def unrecord(self, user: str, client_id: str, value: float, now_ms: int) -> None:
        """Take back a recorded value (a throttled fetch answers no records)."""
        key = sensor_key(self.levels, user, client_id)
        self._sensor(key, now_ms).rate.record(-value, now_ms)

    def max_value_in_window(self, user: str, client_id: str) -> float:
        """The most one request may record without being throttled for sure:
        quota * (count - 1) windows (a fetch's max_bytes is held to it)."""
        limit = self.limit(user, client_id)
        if limit is None:
            return math.inf
        return limit * (QUOTA_WINDOW_COUNT - 1) * (QUOTA_WINDOW_SIZE_MS / 1000)

    def record_mutation(
        self, user: str, client_id: str, partitions: int, strict: bool, now_ms: int
    ) -> MutationDecision:
        """A controller mutation of `partitions` partitions (controller_mutation_rate).
        Strict: refused while the bucket is below zero, else recorded (it may
        overdraw). Permissive: recorded, then checked."""
        key = sensor_key(self.levels, user, client_id)
        limit = limit_for(self.levels, key)
        if limit is None:
            return MutationDecision(True, 0)
        bucket = self._sensor(key, now_ms).bucket
        if strict:
            throttle_ms = bucket.throttle_time_ms(limit, now_ms)
            if throttle_ms > 0:
                return MutationDecision(False, throttle_ms)
            bucket.record(partitions, limit, now_ms)
            return MutationDecision(True, 0)
        bucket.record(partitions, limit, now_ms)
        return MutationDecision(True, bucket.throttle_time_ms(limit, now_ms))


def strict_mutation_quota(api_name: str, api_version: int) -> bool:
    """Kafka refuses mutations over the quota from these versions on; earlier ones
    are only throttled."""
    return api_version >= _STRICT_SINCE.get(api_name, 0)


_STRICT_SINCE = {"CREATE_TOPICS": 6, "CREATE_PARTITIONS": 3, "DELETE_TOPICS": 5}
