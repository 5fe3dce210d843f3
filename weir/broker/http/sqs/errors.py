"""SQS's errors as the JSON protocol carries them: the body's `__type` (the error's
shape) and the `x-amzn-query-error` header (`<query code>;Sender`), from which the
AWS SDKs take the error code they show (`ClientError.response['Error']['Code']`),
so a program written against SQS sees the codes it handles."""

from __future__ import annotations

import json

JSON_CONTENT_TYPE = "application/x-amz-json-1.0"


class SqsError(Exception):
    """One SQS error: the modelled shape, the query-compatible code and HTTP status."""

    def __init__(self, shape: str, query_code: str, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.shape = shape
        self.query_code = query_code
        self.message = message
        self.status = status

    @property
    def fault(self) -> str:
        return "Sender" if self.status < 500 else "Receiver"

    def body(self) -> bytes:
        return json.dumps(
            {"__type": f"com.amazonaws.sqs#{self.shape}", "message": self.message}
        ).encode()

    def headers(self) -> dict[str, str]:
        return {"x-amzn-query-error": f"{self.query_code};{self.fault}"}


def queue_does_not_exist(name: str = "") -> SqsError:
    return SqsError(
        "QueueDoesNotExist",
        "AWS.SimpleQueueService.NonExistentQueue",
        "The specified queue does not exist."
        if not name
        else f"The specified queue {name} does not exist.",
    )


def queue_name_exists(name: str) -> SqsError:
    return SqsError(
        "QueueNameExists",
        "QueueAlreadyExists",
        f"A queue already exists with the same name ({name}) and a different value for "
        "an attribute",
    )


def invalid_parameter(message: str) -> SqsError:
    return SqsError("InvalidParameterValue", "InvalidParameterValue", message)


def missing_parameter(name: str) -> SqsError:
    return SqsError(
        "MissingParameter", "MissingParameter", f"The request must contain the parameter {name}."
    )


def invalid_attribute_name(name: str) -> SqsError:
    return SqsError("InvalidAttributeName", "InvalidAttributeName", f"Unknown Attribute {name}.")


def invalid_attribute_value(message: str) -> SqsError:
    return SqsError("InvalidAttributeValue", "InvalidAttributeValue", message)


def receipt_handle_invalid(handle: str) -> SqsError:
    shown = handle if len(handle) <= 64 else handle[:64] + "..."
    return SqsError(
        "ReceiptHandleIsInvalid",
        "ReceiptHandleIsInvalid",
        f'The input receipt handle "{shown}" is not a valid receipt handle.',
    )


def too_many_entries(count: int) -> SqsError:
    return SqsError(
        "TooManyEntriesInBatchRequest",
        "AWS.SimpleQueueService.TooManyEntriesInBatchRequest",
        f"Maximum number of entries per request are 10. You have sent {count}.",
    )


def empty_batch() -> SqsError:
    return SqsError(
        "EmptyBatchRequest",
        "AWS.SimpleQueueService.EmptyBatchRequest",
        "There should be at least one entry in the request.",
    )


def batch_ids_not_distinct(entry_id: str) -> SqsError:
    return SqsError(
        "BatchEntryIdsNotDistinct",
        "AWS.SimpleQueueService.BatchEntryIdsNotDistinct",
        f"Id {entry_id} repeated.",
    )


def invalid_batch_entry_id(entry_id: str) -> SqsError:
    return SqsError(
        "InvalidBatchEntryId",
        "AWS.SimpleQueueService.InvalidBatchEntryId",
        f"A batch entry id can only contain alphanumeric characters, hyphens and underscores. "
        f"It can be at most 80 letters long. ({entry_id[:100]!r})",
    )


def batch_request_too_long(size: int, limit: int) -> SqsError:
    return SqsError(
        "BatchRequestTooLong",
        "AWS.SimpleQueueService.BatchRequestTooLong",
        f"Batch requests cannot be longer than {limit} bytes. You have sent {size} bytes.",
    )


def message_not_inflight() -> SqsError:
    return SqsError(
        "MessageNotInflight", "AWS.SimpleQueueService.MessageNotInflight", "Message not inflight."
    )


def unsupported_operation(message: str) -> SqsError:
    return SqsError("UnsupportedOperation", "AWS.SimpleQueueService.UnsupportedOperation", message)


def purge_in_progress(name: str) -> SqsError:
    return SqsError(
        "PurgeQueueInProgress",
        "AWS.SimpleQueueService.PurgeQueueInProgress",
        f"Only one PurgeQueue operation on {name} is allowed every 60 seconds.",
    )


def invalid_action(action: str) -> SqsError:
    return SqsError(
        "InvalidAction",
        "InvalidAction",
        f"The action or operation requested is invalid: {action[:100]!r}.",
    )


def malformed_request(message: str) -> SqsError:
    return SqsError("SerializationException", "MalformedQueryString", message)


def access_denied(message: str) -> SqsError:
    return SqsError("AccessDeniedException", "AccessDenied", message, status=403)


def signature_does_not_match(message: str) -> SqsError:
    return SqsError("InvalidSignatureException", "SignatureDoesNotMatch", message, status=403)


def invalid_client_token(message: str) -> SqsError:
    return SqsError("UnrecognizedClientException", "InvalidClientTokenId", message, status=403)


def request_expired(message: str) -> SqsError:
    return SqsError("RequestExpired", "RequestExpired", message, status=400)


def missing_authentication(message: str) -> SqsError:
    return SqsError(
        "MissingAuthenticationTokenException", "MissingAuthenticationToken", message, status=403
    )


def resource_not_found(message: str) -> SqsError:
    return SqsError("ResourceNotFoundException", "ResourceNotFoundException", message, status=404)


def internal_error(message: str) -> SqsError:
    return SqsError("InternalError", "InternalError", message, status=500)


def service_unavailable(message: str) -> SqsError:
    return SqsError("ServiceUnavailable", "ServiceUnavailable", message, status=503)


def request_too_large(message: str) -> SqsError:
    return SqsError("RequestEntityTooLarge", "RequestEntityTooLarge", message, status=413)
