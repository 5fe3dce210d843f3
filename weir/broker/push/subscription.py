"""A push subscription: what it is, how it is checked, how it is stored.

Pure: no Trio, no I/O, no clock (times are arguments). A subscription is stored in the
cluster metadata (`ClusterMetadata.push_subscriptions`, name -> `to_stored()`), so every
broker of the cluster sees it; its deliveries go through one share group,
`weir-push-<name>`, whose group configs the subscription sets (`group_configs`): the
retry policy becomes the share group's delivery count limit and release backoff, the
dead-letter topic its dead-letter topic.

Bounds (a request outside them is refused with a message naming the field): see the
`*_MAX`/`*_MIN` constants below; docs/http-push.md lists them.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import urlsplit

NAME_PATTERN = re.compile(r"^[a-zA-Z0-9._-]{1,100}$")
GROUP_PREFIX = "weir-push-"
TOPIC_NAME_PATTERN = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")
URL_LENGTH_MAX = 2048
HEADER_FILTERS_MAX = 16
FILTER_VALUES_MAX = 16
HEADER_NAME_LENGTH_MAX = 256
HEADER_VALUE_LENGTH_MAX = 1024
BATCH_SIZE_MAX = 500
CONCURRENCY_MAX = 64
TIMEOUT_MS_MIN = 100
# A delivery's records are locked for its timeout plus LOCK_MARGIN_MS (at least the
# group's default 30 s); the broker's default lock maximum is 60 s.
TIMEOUT_MS_MAX = 50_000
LOCK_MARGIN_MS = 10_000
LOCK_MS_DEFAULT = 30_000
BACKOFF_MS_MAX = 900_000  # the broker's share_delivery_delay_max_ms default
MAX_ATTEMPTS_MAX = 100
SECRET_BYTES = 32
STARTS = ("latest", "earliest")

# Group config names (weir.groupcoord.group_configs), as the subscription sets them.
DELIVERY_COUNT_LIMIT = "share.delivery.count.limit"
AUTO_OFFSET_RESET = "share.auto.offset.reset"
RECORD_LOCK_DURATION_MS = "share.record.lock.duration.ms"
RELEASE_BACKOFF_INITIAL_MS = "weir.share.release.backoff.initial.ms"
RELEASE_BACKOFF_MAX_MS = "weir.share.release.backoff.max.ms"
DEAD_LETTER_TOPIC = "errors.deadletterqueue.topic.name"
DEAD_LETTER_COPY_RECORD = "errors.deadletterqueue.copy.record.enable"


class SubscriptionError(ValueError):
    """A subscription refused: the message says which field and why."""


@dataclass(frozen=True)
class HeaderFilter:
    """A record matches when it has header `name` with one of `values` (UTF-8 text;
    no values: the header is there, whatever its value)."""

    name: str
    values: tuple[str, ...] = ()

    def matches(self, headers: Sequence[tuple[str, bytes | None]]) -> bool:
        for name, value in headers:
            if name != self.name:
                continue
            if not self.values:
                return True
            if value is not None and value.decode("utf-8", "replace") in self.values:
                return True
        return False


@dataclass(frozen=True)
class RetryPolicy:
    """A failed delivery is tried again after min_backoff_ms, then twice that, ...,
    at most max_backoff_ms; after max_attempts deliveries it is dead-lettered."""

    min_backoff_ms: int = 1_000
    max_backoff_ms: int = 60_000
    max_attempts: int = 5

    def backoff_ms(self, attempts: int) -> int:
        """The wait after the `attempts`-th failed delivery (1: min_backoff_ms)."""
        if attempts <= 0 or self.min_backoff_ms <= 0:
            return 0
        doublings = min(attempts - 1, 40)
        return min(self.min_backoff_ms << doublings, self.max_backoff_ms)


@dataclass(frozen=True)
class Subscription:
    name: str
    topic: str
    url: str
    secret: str
    header_filters: tuple[HeaderFilter, ...] = ()
    batch_size: int = 1
    # Deliveries (POSTs) in flight at once per partition, on its leader.
    concurrency: int = 4
    timeout_ms: int = 10_000
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    dead_letter_topic: str | None = None
    ordered_by_key: bool = False
    paused: bool = False
    start: str = "latest"
    created_ms: int = 0

    @property
    def group_id(self) -> str:
        return group_id_of(self.name)

    @property
    def lock_ms(self) -> int:
        return max(LOCK_MS_DEFAULT, self.timeout_ms + LOCK_MARGIN_MS)

    def matches(self, headers: Sequence[tuple[str, bytes | None]]) -> bool:
        """Every filter matches (none: every record)."""
        return all(f.matches(headers) for f in self.header_filters)

    def group_configs(self) -> dict[str, str]:
        """The share group's config overrides this subscription needs."""
        # Ordered by key, the delivery loop waits out the backoff itself, holding the
        # record; records it gives back (paused, leadership moving) must come back
        # at once and in offset order, not each after its own release backoff.
        initial_ms = 0 if self.ordered_by_key else self.retry.min_backoff_ms
        configs = {
            AUTO_OFFSET_RESET: self.start,
            DELIVERY_COUNT_LIMIT: str(self.retry.max_attempts),
            RELEASE_BACKOFF_INITIAL_MS: str(initial_ms),
            RELEASE_BACKOFF_MAX_MS: str(self.retry.max_backoff_ms),
        }
        if self.lock_ms != LOCK_MS_DEFAULT:
            configs[RECORD_LOCK_DURATION_MS] = str(self.lock_ms)
        if self.dead_letter_topic is not None:
            configs[DEAD_LETTER_TOPIC] = self.dead_letter_topic
            configs[DEAD_LETTER_COPY_RECORD] = "true"
        return configs

    def to_stored(self) -> dict[str, Any]:
        """The metadata document's form (with the secret)."""
        return {**self.to_public(), "secret": self.secret}

    def to_public(self) -> dict[str, Any]:
        """What the API shows (never the secret)."""
        return {
            "name": self.name,
            "topic": self.topic,
            "group": self.group_id,
            "url": self.url,
            "header_filters": [
                {"name": f.name, "values": list(f.values)} for f in self.header_filters
            ],
            "batch_size": self.batch_size,
            "concurrency": self.concurrency,
            "timeout_ms": self.timeout_ms,
            "retry": {
                "min_backoff_ms": self.retry.min_backoff_ms,
                "max_backoff_ms": self.retry.max_backoff_ms,
                "max_attempts": self.retry.max_attempts,
            },
            "dead_letter_topic": self.dead_letter_topic,
            "ordered_by_key": self.ordered_by_key,
            "paused": self.paused,
            "start": self.start,
            "created_ms": self.created_ms,
        }

    def with_paused(self, paused: bool) -> Subscription:
        return replace(self, paused=paused)


def group_id_of(name: str) -> str:
    return GROUP_PREFIX + name


def new_secret() -> str:
    return secrets.token_hex(SECRET_BYTES)


def subscription_from_request(doc: object, *, now_ms: int, secret: str) -> Subscription:
    """A new subscription from a create request's JSON (SubscriptionError)."""
    if not isinstance(doc, Mapping):
        raise SubscriptionError("the body must be a JSON object")
    return _parse(doc, secret=secret, created_ms=now_ms, paused=_bool(doc, "paused", False))


def subscription_from_stored(doc: Mapping[str, Any]) -> Subscription:
    """A subscription from the metadata document (SubscriptionError when damaged)."""
    secret = doc.get("secret")
    if not isinstance(secret, str) or not secret:
        raise SubscriptionError("secret: missing")
    created_ms = doc.get("created_ms", 0)
    if not isinstance(created_ms, int):
        raise SubscriptionError("created_ms: not an integer")
    return _parse(doc, secret=secret, created_ms=created_ms, paused=_bool(doc, "paused", False))


_KNOWN_FIELDS = frozenset(
    {
        "name", "topic", "group", "url", "header_filters", "batch_size", "concurrency",
        "timeout_ms", "retry", "dead_letter_topic", "ordered_by_key", "paused", "start",
        "created_ms", "secret",
    }
)  # fmt: skip
_RETRY_FIELDS = frozenset({"min_backoff_ms", "max_backoff_ms", "max_attempts"})


def _parse(doc: Mapping[str, Any], *, secret: str, created_ms: int, paused: bool) -> Subscription:
    unknown = sorted(str(k) for k in doc if k not in _KNOWN_FIELDS)
    if unknown:
        raise SubscriptionError(f"unknown field {unknown[0]!r}")
    name = _string(doc, "name", required=True)
    if not NAME_PATTERN.match(name):
        raise SubscriptionError(
            "name: 1 to 100 characters of ASCII letters, digits, '.', '_' and '-'"
        )
    topic = _topic(doc, "topic", required=True)
    assert topic is not None
    group = doc.get("group")
    if group is not None and group != group_id_of(name):
        raise SubscriptionError(f"group: a subscription's share group is {group_id_of(name)!r}")
    start = _string(doc, "start") or "latest"
    if start not in STARTS:
        raise SubscriptionError("start: 'latest' or 'earliest'")
    return Subscription(
        name=name,
        topic=topic,
        url=_url(doc),
        secret=secret,
        header_filters=_filters(doc.get("header_filters", [])),
        batch_size=_int(doc, "batch_size", 1, 1, BATCH_SIZE_MAX),
        concurrency=_int(doc, "concurrency", 4, 1, CONCURRENCY_MAX),
        timeout_ms=_int(doc, "timeout_ms", 10_000, TIMEOUT_MS_MIN, TIMEOUT_MS_MAX),
        retry=_retry(doc.get("retry", {})),
        dead_letter_topic=_topic(doc, "dead_letter_topic"),
        ordered_by_key=_bool(doc, "ordered_by_key", False),
        paused=paused,
        start=start,
        created_ms=created_ms,
    )


def _string(doc: Mapping[str, Any], name: str, *, required: bool = False) -> str:
    value = doc.get(name)
    if value is None:
        if required:
            raise SubscriptionError(f"{name}: required")
        return ""
    if not isinstance(value, str):
        raise SubscriptionError(f"{name}: must be a string")
    return value


def _topic(doc: Mapping[str, Any], name: str, *, required: bool = False) -> str | None:
    value = _string(doc, name, required=required)
    if not value:
        return None
    if not TOPIC_NAME_PATTERN.match(value) or value in (".", ".."):
        raise SubscriptionError(f"{name}: {value[:50]!r} is not a valid topic name")
    if value.startswith("__"):
        raise SubscriptionError(f"{name}: internal topics cannot be used")
    return value


def _int(doc: Mapping[str, Any], name: str, default: int, low: int, high: int) -> int:
    value = doc.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise SubscriptionError(f"{name}: must be an integer")
    if not low <= value <= high:
        raise SubscriptionError(f"{name}: must be between {low} and {high}, not {value}")
    return value


def _bool(doc: Mapping[str, Any], name: str, default: bool) -> bool:
    value = doc.get(name, default)
    if not isinstance(value, bool):
        raise SubscriptionError(f"{name}: must be true or false")
    return value


def _url(doc: Mapping[str, Any]) -> str:
    url = _string(doc, "url", required=True)
    if len(url) > URL_LENGTH_MAX:
        raise SubscriptionError(f"url: longer than {URL_LENGTH_MAX} characters")
    if any(ord(c) <= 32 or ord(c) >= 127 for c in url):
        raise SubscriptionError("url: spaces, control and non-ASCII characters are not allowed")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise SubscriptionError(f"url: {exc}") from None
    if parts.scheme not in ("http", "https"):
        raise SubscriptionError("url: the scheme must be http or https")
    if not parts.hostname:
        raise SubscriptionError("url: a host is required")
    if parts.fragment:
        raise SubscriptionError("url: no fragment (#...) is allowed")
    del port
    return url


def _filters(value: object) -> tuple[HeaderFilter, ...]:
    if not isinstance(value, list):
        raise SubscriptionError("header_filters: must be a list")
    if len(value) > HEADER_FILTERS_MAX:
        raise SubscriptionError(f"header_filters: at most {HEADER_FILTERS_MAX}")
    filters = []
    for index, item in enumerate(value):
        where = f"header_filters[{index}]"
        if not isinstance(item, Mapping) or set(item) - {"name", "values"}:
            raise SubscriptionError(f"{where}: an object with 'name' and 'values'")
        name = item.get("name")
        if not isinstance(name, str) or not 1 <= len(name) <= HEADER_NAME_LENGTH_MAX:
            raise SubscriptionError(f"{where}.name: 1 to {HEADER_NAME_LENGTH_MAX} characters")
        values = item.get("values", [])
        if not isinstance(values, list) or len(values) > FILTER_VALUES_MAX:
            raise SubscriptionError(f"{where}.values: a list of at most {FILTER_VALUES_MAX}")
        for v in values:
            if not isinstance(v, str) or len(v) > HEADER_VALUE_LENGTH_MAX:
                raise SubscriptionError(
                    f"{where}.values: strings of at most {HEADER_VALUE_LENGTH_MAX} characters"
                )
        filters.append(HeaderFilter(name, tuple(values)))
    return tuple(filters)


def _retry(value: object) -> RetryPolicy:
    if not isinstance(value, Mapping):
        raise SubscriptionError("retry: must be an object")
    unknown = sorted(str(k) for k in value if k not in _RETRY_FIELDS)
    if unknown:
        raise SubscriptionError(f"retry: unknown field {unknown[0]!r}")
    where = {f"retry.{k}": v for k, v in value.items()}
    low = _int(where, "retry.min_backoff_ms", 1_000, 0, BACKOFF_MS_MAX)
    high = _int(where, "retry.max_backoff_ms", max(60_000, low), 0, BACKOFF_MS_MAX)
    if high < low:
        raise SubscriptionError("retry.max_backoff_ms: must be at least retry.min_backoff_ms")
    attempts = _int(where, "retry.max_attempts", 5, 1, MAX_ATTEMPTS_MAX)
    return RetryPolicy(low, high, attempts)
