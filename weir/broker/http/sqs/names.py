"""Queue names, URLs and ARNs, and the Weir topic and share group behind a queue.

A queue `orders` is the topic `orders` (so Kafka clients produce to it and read it
under its own name) marked as a queue by its topic config `weir.sqs.queue` (the
queue's SQS-only attributes, JSON), consumed by the share group `sqs.orders`. Its
URL is `<endpoint>/000000000000/orders`, its ARN `arn:aws:sqs:weir:000000000000:orders`
(one fixed account: Weir's principals are not AWS accounts).
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from weir.broker.http.sqs.errors import SqsError, invalid_parameter, queue_does_not_exist

ACCOUNT_ID = "000000000000"
REGION = "weir"
GROUP_PREFIX = "sqs."
FIFO_SUFFIX = ".fifo"
QUEUE_NAME_CHARS_MAX = 80
QUEUE_URL_CHARS_MAX = 2048
_NAME = re.compile(r"[A-Za-z0-9_-]{1,80}")


def check_queue_name(name: str, *, fifo: bool) -> None:
    """SQS's rule: 1 to 80 characters, alphanumerics, hyphens and underscores, and a
    FIFO queue's name ends with `.fifo` (counted in the 80)."""
    base = name[: -len(FIFO_SUFFIX)] if name.endswith(FIFO_SUFFIX) else name
    if (
        len(name) > QUEUE_NAME_CHARS_MAX
        or not _NAME.fullmatch(base)
        or name.endswith(FIFO_SUFFIX) != fifo
    ):
        if fifo and not name.endswith(FIFO_SUFFIX):
            raise invalid_parameter(
                "The name of a FIFO queue can only include alphanumeric "
                "characters, hyphens, or underscores, must end with .fifo "
                "suffix and be 1 to 80 in length."
            )
        raise invalid_parameter(
            "Can only include alphanumeric characters, hyphens, or underscores. 1 to 80 in length"
        )


def is_queue_name(name: str) -> bool:
    base = name[: -len(FIFO_SUFFIX)] if name.endswith(FIFO_SUFFIX) else name
    return len(name) <= QUEUE_NAME_CHARS_MAX and _NAME.fullmatch(base) is not None


def group_of(queue: str) -> str:
    """The share group a queue is consumed through."""
    return GROUP_PREFIX + queue


def queue_url(endpoint: str, queue: str) -> str:
    return f"{endpoint.rstrip('/')}/{ACCOUNT_ID}/{queue}"


def queue_arn(queue: str) -> str:
    return f"arn:aws:sqs:{REGION}:{ACCOUNT_ID}:{queue}"


def queue_from_url(url: object) -> str:
    """The queue a QueueUrl names: its last path segment (any host: the SDK sends
    back what GetQueueUrl gave, or a URL built by hand). A bare name is accepted too."""
    if not isinstance(url, str) or not url:
        raise SqsError(
            "MissingParameter",
            "MissingParameter",
            "The request must contain the parameter QueueUrl.",
        )
    if len(url) > QUEUE_URL_CHARS_MAX:
        raise invalid_parameter("QueueUrl is too long.")
    path = urlsplit(url).path if "://" in url else url
    name = path.rstrip("/").rsplit("/", 1)[-1]
    if not is_queue_name(name):
        raise queue_does_not_exist()
    return name


def queue_from_arn(arn: object) -> str:
    """The queue an ARN names (`arn:aws:sqs:REGION:ACCOUNT:NAME`; any region and account)."""
    if not isinstance(arn, str):
        raise invalid_parameter("Value for parameter deadLetterTargetArn is invalid.")
    parts = arn.split(":")
    if len(parts) != 6 or parts[0] != "arn" or parts[2] != "sqs" or not is_queue_name(parts[5]):
        raise invalid_parameter(f"Value {arn[:200]} for parameter deadLetterTargetArn is invalid.")
    return parts[5]
