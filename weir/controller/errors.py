"""The controller's refusal: a Kafka error code and a message for the client."""

from __future__ import annotations

from weir.format.errors import ErrorCode


class ControllerError(Exception):
    def __init__(self, error_code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.message = message
