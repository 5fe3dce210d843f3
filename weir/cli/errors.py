"""Expected failures of the `weir` command and the one-line messages users see for them."""

from __future__ import annotations

from dataclasses import dataclass

from weir.format.errors import ErrorCode


class CliError(Exception):
    """An expected failure: `main` prints `error: <message>` on stderr and exits non-zero."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code


class BrokerConnectionError(CliError):
    """The broker could not be reached, stopped answering or closed the connection."""


class BrokerProtocolError(CliError):
    """The broker answered something this client cannot use (bad frame, no common version)."""


def error_name(code: int) -> str:
    """Kafka's name for an error code (`UNKNOWN_TOPIC_OR_PARTITION`), or `ERROR_<n>`."""
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"ERROR_{code}"


def describe_kafka_error(
    code: int,
    *,
    topic: str | None = None,
    partition: int | None = None,
    action: str | None = None,
    message: str | None = None,
) -> str:
    """One line for a Kafka error code: `topic 'x' does not exist (UNKNOWN_TOPIC_OR_PARTITION)`.

    `action` says what was attempted ("create"), `message` is the broker's own
    error_message when it sent one.
    """
    name = error_name(code)
    subject = f"topic '{topic}'" if topic is not None else "request"
    if partition is not None:
        subject += f" partition {partition}"
    if code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
        what = "does not exist"
        if partition is not None:
            what = "is not known to the broker"
        return f"{subject} {what} ({name})"
    if code == ErrorCode.TOPIC_ALREADY_EXISTS and topic is not None:
        return f"{subject} already exists ({name})"
    detail = message or name.lower().replace("_", " ")
    prefix = f"cannot {action} {subject}" if action else subject
    return f"{prefix}: {detail} ({name})"


class KafkaCodeError(CliError):
    """A Kafka error code the broker answered; `code` lets a command explain it further."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


def kafka_error(
    code: int,
    *,
    topic: str | None = None,
    partition: int | None = None,
    action: str | None = None,
    message: str | None = None,
) -> KafkaCodeError:
    return KafkaCodeError(
        describe_kafka_error(
            code, topic=topic, partition=partition, action=action, message=message
        ),
        code,
    )


def with_code(sentence: str, code: int) -> KafkaCodeError:
    """A sentence the user can act on, with Kafka's name for `code` at the end."""
    return KafkaCodeError(f"{sentence} ({error_name(code)})", code)


def failed_to(doing: str, code: int, message: str | None = None) -> CliError:
    """`cannot <doing>: <the broker's message, or the code in words> (CODE)`, for errors
    without a more specific sentence."""
    detail = message or error_name(code).lower().replace("_", " ")
    return with_code(f"cannot {doing}: {detail}", code)


@dataclass(frozen=True)
class GroupAction:
    """What the CLI tried to do to a group, for error sentences: "cannot <attempt> group
    'g'" and "stop them before <before>"."""

    attempt: str
    before: str


DESCRIBE_GROUP = GroupAction("describe", "describing it")
DELETE_GROUP = GroupAction("delete", "deleting it")
RESET_GROUP_OFFSETS = GroupAction("reset the offsets of", "resetting its offsets")

_COORDINATOR_BUSY = (
    "the coordinator of group '{group_id}' is not ready (it is loading or moving); "
    "retry in a few seconds"
)
# Group coordinator errors a user can do something about, as sentences about the group.
_GROUP_SENTENCES = {
    ErrorCode.GROUP_ID_NOT_FOUND: "group '{group_id}' does not exist",
    ErrorCode.NON_EMPTY_GROUP: (
        "group '{group_id}' still has active members; stop them (or wait for their "
        "session to expire) before {before}"
    ),
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS: _COORDINATOR_BUSY,
    ErrorCode.COORDINATOR_NOT_AVAILABLE: _COORDINATOR_BUSY,
    ErrorCode.NOT_COORDINATOR: _COORDINATOR_BUSY,
}


def group_error(
    code: int, group_id: str, action: GroupAction, message: str | None = None
) -> CliError:
    """A group coordinator's error as a sentence about `group_id`."""
    template = next((t for c, t in _GROUP_SENTENCES.items() if c == code), None)
    if template is not None:
        return with_code(template.format(group_id=group_id, before=action.before), code)
    return failed_to(f"{action.attempt} group '{group_id}'", code, message)


def no_such_partition(topic: str, partition: int, count: int) -> CliError:
    return CliError(
        f"topic '{topic}' has no partition {partition} (it has {count}: 0..{count - 1})"
    )
