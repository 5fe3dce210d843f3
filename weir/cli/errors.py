"""Expected failures of the `weir` command and the one-line messages users see for them."""

from __future__ import annotations

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


def group_error(code: int, group_id: str, *, action: str) -> CliError:
    """A group request's error as a sentence: `cannot join group 'g': ... (CODE)`."""
    name = error_name(code)
    if code == ErrorCode.GROUP_ID_NOT_FOUND:
        return CliError(f"group '{group_id}' does not exist ({name})")
    detail = name.lower().replace("_", " ")
    return CliError(f"cannot {action} group '{group_id}': {detail} ({name})")
