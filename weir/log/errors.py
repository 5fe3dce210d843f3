"""Errors raised by partition logs. Each carries the Kafka error code to answer with."""

from __future__ import annotations

from weir.format.errors import ErrorCode


class LogError(Exception):
    """A request the log refuses; `error_code` is what the client is told."""

    def __init__(self, error_code: ErrorCode, message: str = "") -> None:
        super().__init__(message or error_code.name)
        self.error_code = error_code


class RecordErrors(LogError):  # noqa: N818
    """KIP-467: some records of a batch are invalid; the whole batch is refused and
    `record_errors` names them: (index of the record in its batch, why)."""

    def __init__(
        self, error_code: ErrorCode, message: str, record_errors: list[tuple[int, str]]
    ) -> None:
        super().__init__(error_code, message)
        self.record_errors = record_errors


def record_errors_message(error_code: ErrorCode, record_errors: list[tuple[int, str]]) -> str:
    """The partition's error message, worded as Kafka's LogValidator words it."""
    if error_code == ErrorCode.INVALID_TIMESTAMP:
        return "One or more records have been rejected due to invalid timestamp"
    shown = ", ".join(
        f"RecordError(batchIndex={index}, message='{why}')" for index, why in record_errors[:3]
    )
    return (
        f"One or more records have been rejected due to {len(record_errors)} record errors "
        f"in total, and only showing the first three errors at most: [{shown}]"
    )


class OffsetOutOfRange(LogError):  # noqa: N818 (the contract names it)
    """The offset lies before the log start offset or after the log end offset."""

    def __init__(self, offset: int, log_start_offset: int, log_end_offset: int) -> None:
        super().__init__(
            ErrorCode.OFFSET_OUT_OF_RANGE,
            f"offset {offset} is outside [{log_start_offset}, {log_end_offset}]",
        )
        self.offset = offset


class LogClosed(LogError):  # noqa: N818
    """The log was closed or deleted while the caller waited on it."""

    def __init__(self, message: str = "the partition log is closed") -> None:
        super().__init__(ErrorCode.NOT_LEADER_OR_FOLLOWER, message)


class LogTruncated(LogError):  # noqa: N818
    """The offset a caller waited for was truncated away (leadership moved)."""

    def __init__(self, offset: int, log_end_offset: int) -> None:
        super().__init__(
            ErrorCode.NOT_LEADER_OR_FOLLOWER,
            f"offset {offset} was truncated; the log now ends at {log_end_offset}",
        )


class LogCorrupt(LogError):  # noqa: N818
    """A stored batch header that does not parse outside recovery (bit rot, or
    files changed under the broker)."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.KAFKA_STORAGE_ERROR, message)


class LogDamaged(LogError):  # noqa: N818
    """Recovery found damage it cannot repair without losing or reusing offsets
    of records that were made durable: the partition stays offline, its files
    untouched, until `weir repair` is run. `problem` says what is damaged."""

    def __init__(self, directory_name: str, problem: str) -> None:
        super().__init__(
            ErrorCode.KAFKA_STORAGE_ERROR, f"partition {directory_name} is damaged: {problem}"
        )
        self.directory_name = directory_name
        self.problem = problem
