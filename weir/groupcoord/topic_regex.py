"""Regular-expression subscriptions of KIP-848 consumer groups (SubscribedTopicRegex).

Kafka's coordinator compiles a member's regex with RE2/J and matches it against
whole topic names. Weir uses RE2 itself (the `google-re2` bindings): the same
dialect, and matching in time linear in the topic name whatever the pattern, so a
hostile pattern cannot stall the event loop the way a backtracking engine (Python's
`re`) can. RE2 has no backreferences and no lookaround; patterns using them, and
any pattern RE2 cannot compile, are refused with INVALID_REGULAR_EXPRESSION, as
Kafka refuses them. On top of RE2's own limits, a pattern is at most
`REGEX_LENGTH_MAX` characters and its compiled program at most
`REGEX_MEMORY_MAX_BYTES`, so compiling one is bounded too.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

import re2

REGEX_LENGTH_MAX = 8_192
REGEX_MEMORY_MAX_BYTES = 1 << 20


class TopicRegexError(ValueError):
    """The pattern is too long or not a regular expression RE2 accepts."""


class TopicPattern(Protocol):
    def fullmatch(self, text: str) -> object | None: ...


def _options() -> re2.Options:
    options = re2.Options()
    options.log_errors = False  # RE2 would print every refused pattern to stderr
    options.max_mem = REGEX_MEMORY_MAX_BYTES
    return options


_OPTIONS = _options()


def compile_topic_regex(regex: str) -> TopicPattern:
    """The compiled pattern, or TopicRegexError with a message for the client."""
    if len(regex) > REGEX_LENGTH_MAX:
        raise TopicRegexError(
            f"SubscribedTopicRegex is {len(regex)} characters long; "
            f"at most {REGEX_LENGTH_MAX} are accepted."
        )
    try:
        pattern: TopicPattern = re2.compile(regex, options=_OPTIONS)
    except re2.error as exc:
        reason = exc.args[0] if exc.args else exc
        if isinstance(reason, bytes):
            reason = reason.decode("utf-8", "replace")
        raise TopicRegexError(
            f"SubscribedTopicRegex `{regex}` is not a valid regular expression: {reason}."
        ) from None
    return pattern


def matching_topics(pattern: TopicPattern, topic_names: Iterable[str]) -> frozenset[str]:
    """The names the whole of which the pattern matches (Kafka's `matches()`)."""
    return frozenset(name for name in topic_names if pattern.fullmatch(name) is not None)
