"""Message bodies and message attributes: SQS's rules, their record headers, and the
MD5 digests SQS answers with (the SDKs that check them, the Java SDK's for one, would
refuse an answer whose digests differ).

A message attribute `Name` of type `String`, `Number` or `Binary` (with an optional
custom label, `Number.float`) is the record header `sqs.attr.Name` whose value is
`<DataType>:<value>` (the UTF-8 string, or the raw bytes): the type travels with the
record, so a message sent through SQS and read by a Kafka consumer keeps it, and a
Kafka producer can attach attributes an SQS consumer sees.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from weir.broker.http.sqs.errors import SqsError, invalid_parameter

ATTRIBUTE_HEADER_PREFIX = "sqs.attr."
MESSAGE_ATTRIBUTES_MAX = 10
ATTRIBUTE_NAME_CHARS_MAX = 256
DATA_TYPE_CHARS_MAX = 256
STRING_TRANSPORT, BINARY_TRANSPORT = 1, 2
_NAME = re.compile(r"[A-Za-z0-9_.-]+")
_DATA_TYPE = re.compile(r"(String|Number|Binary)(\.[A-Za-z0-9_.-]+)?")
_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")
NUMBER_DIGITS_MAX = 38
# Characters SQS allows in a body or a string value (XML 1.0's).
_INVALID_CHARS = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


@dataclass(frozen=True)
class MessageAttribute:
    data_type: str
    string_value: str | None = None
    binary_value: bytes | None = None

    @property
    def is_binary(self) -> bool:
        return self.data_type.startswith("Binary")

    def value_bytes(self) -> bytes:
        if self.is_binary:
            assert self.binary_value is not None
            return self.binary_value
        assert self.string_value is not None
        return self.string_value.encode()

    def size_bytes(self, name: str) -> int:
        """What it counts towards the message size limit (name, type and value)."""
        return len(name.encode()) + len(self.data_type.encode()) + len(self.value_bytes())

    def to_json(self) -> dict[str, str]:
        if self.is_binary:
            assert self.binary_value is not None
            return {
                "DataType": self.data_type,
                "BinaryValue": base64.b64encode(self.binary_value).decode(),
            }
        assert self.string_value is not None
        return {"DataType": self.data_type, "StringValue": self.string_value}


def check_body(body: object) -> str:
    if not isinstance(body, str):
        raise SqsError(
            "MissingParameter",
            "MissingParameter",
            "The request must contain the parameter MessageBody.",
        )
    if not body:
        raise invalid_parameter("The request must contain the parameter MessageBody.")
    if _INVALID_CHARS.search(body):
        raise SqsError(
            "InvalidMessageContents",
            "InvalidMessageContents",
            "Invalid characters found. Valid unicode characters are #x9 | #xA | "
            "#xD | #x20 to #xD7FF | #xE000 to #xFFFD | #x10000 to #x10FFFF",
        )
    return body


def parse_message_attributes(raw: object) -> dict[str, MessageAttribute]:
    """The request's MessageAttributes, checked as SQS checks them."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise invalid_parameter("MessageAttributes must be a map.")
    if len(raw) > MESSAGE_ATTRIBUTES_MAX:
        raise invalid_parameter(
            f"Number of message attributes [{len(raw)}] exceeds the allowed maximum "
            f"[{MESSAGE_ATTRIBUTES_MAX}]."
        )
    return {_checked_name(name): _checked_attribute(name, value) for name, value in raw.items()}


def _checked_name(name: object) -> str:
    if (
        not isinstance(name, str)
        or not name
        or len(name) > ATTRIBUTE_NAME_CHARS_MAX
        or not _NAME.fullmatch(name)
        or name.startswith(".")
        or name.endswith(".")
        or ".." in name
        or name.lower().startswith(("aws.", "amazon."))
    ):
        raise invalid_parameter(f"Message attribute name '{str(name)[:300]}' is invalid.")
    return name


def _checked_attribute(name: str, value: object) -> MessageAttribute:
    if not isinstance(value, Mapping):
        raise invalid_parameter(f"Message attribute '{name}' must be a structure.")
    data_type = value.get("DataType")
    if not isinstance(data_type, str) or not data_type:
        raise invalid_parameter(
            f"The message attribute '{name}' must contain a non-empty message attribute type."
        )
    if len(data_type) > DATA_TYPE_CHARS_MAX or not _DATA_TYPE.fullmatch(data_type):
        raise invalid_parameter(
            f"The type of message attribute '{name}' is invalid. You must "
            "use only the following supported type prefixes: Binary, "
            "Number, String."
        )
    string_value, binary_value = value.get("StringValue"), value.get("BinaryValue")
    if data_type.startswith("Binary"):
        if not isinstance(binary_value, str) or string_value is not None:
            raise invalid_parameter(
                f"The message attribute '{name}' with type 'Binary' must use field 'Binary'."
            )
        try:
            decoded = base64.b64decode(binary_value, validate=True)
        except binascii.Error:
            raise invalid_parameter(
                f"The message attribute '{name}' has an invalid binary value."
            ) from None
        if not decoded:
            raise invalid_parameter(
                f"The message attribute '{name}' must contain a non-empty "
                "value of message attribute type 'Binary'."
            )
        return MessageAttribute(data_type, binary_value=decoded)
    if not isinstance(string_value, str) or binary_value is not None:
        raise invalid_parameter(
            f"The message attribute '{name}' with type "
            f"'{data_type.split('.')[0]}' must use field 'String'."
        )
    if not string_value:
        raise invalid_parameter(
            f"The message attribute '{name}' must contain a non-empty value "
            f"of message attribute type '{data_type}'."
        )
    if _INVALID_CHARS.search(string_value):
        raise invalid_parameter(f"The message attribute '{name}' contains invalid characters.")
    if data_type.startswith("Number") and not _is_number(string_value):
        raise invalid_parameter(
            f"Can't cast the value of message (user) attribute '{name}' to a number."
        )
    return MessageAttribute(data_type, string_value=string_value)


def _is_number(text: str) -> bool:
    if not _NUMBER.fullmatch(text):
        return False
    digits = sum(ch.isdigit() for ch in text.split("e")[0].split("E")[0])
    return digits <= NUMBER_DIGITS_MAX


def attributes_size_bytes(attributes: Mapping[str, MessageAttribute]) -> int:
    return sum(attribute.size_bytes(name) for name, attribute in attributes.items())


def md5_of_body(body: str) -> str:
    return hashlib.md5(body.encode(), usedforsecurity=False).hexdigest()


def md5_of_attributes(attributes: Mapping[str, MessageAttribute]) -> str | None:
    """SQS's MD5OfMessageAttributes: over the attributes sorted by name, each its name,
    its type (both length-prefixed, 4 bytes big-endian), a transport byte (1 string,
    2 binary) and its value (length-prefixed). None without attributes."""
    if not attributes:
        return None
    digest = hashlib.md5(usedforsecurity=False)
    for name in sorted(attributes):
        attribute = attributes[name]
        for part in (name.encode(), attribute.data_type.encode()):
            digest.update(struct.pack(">I", len(part)) + part)
        digest.update(bytes([BINARY_TRANSPORT if attribute.is_binary else STRING_TRANSPORT]))
        value = attribute.value_bytes()
        digest.update(struct.pack(">I", len(value)) + value)
    return digest.hexdigest()


def attribute_headers(attributes: Mapping[str, MessageAttribute]) -> list[tuple[str, bytes]]:
    return [
        (
            ATTRIBUTE_HEADER_PREFIX + name,
            attribute.data_type.encode() + b":" + attribute.value_bytes(),
        )
        for name, attribute in sorted(attributes.items())
    ]


def attributes_from_headers(
    headers: Sequence[tuple[str, bytes | None]],
) -> dict[str, MessageAttribute]:
    """The message attributes a record's headers carry (`sqs.attr.*`; a header that
    does not decode as one is left out: a Kafka producer may have written anything)."""
    found: dict[str, MessageAttribute] = {}
    for key, value in headers:
        if not key.startswith(ATTRIBUTE_HEADER_PREFIX) or value is None:
            continue
        name = key[len(ATTRIBUTE_HEADER_PREFIX) :]
        data_type_bytes, separator, payload = value.partition(b":")
        try:
            data_type = data_type_bytes.decode()
        except UnicodeDecodeError:
            continue
        if not separator or not _DATA_TYPE.fullmatch(data_type) or not _NAME.fullmatch(name):
            continue
        if data_type.startswith("Binary"):
            if payload:
                found[name] = MessageAttribute(data_type, binary_value=payload)
            continue
        try:
            text = payload.decode()
        except UnicodeDecodeError:
            continue
        if text:
            found[name] = MessageAttribute(data_type, string_value=text)
    return found


def select_attributes(
    attributes: Mapping[str, MessageAttribute], names: Sequence[str]
) -> dict[str, MessageAttribute]:
    """What ReceiveMessage's MessageAttributeNames asks for: `All` or `.*`, a name, or
    a prefix ending in `.*`."""
    if not names:
        return {}
    selected = {}
    for name, attribute in attributes.items():
        for wanted in names:
            everything = wanted in ("All", ".*")
            prefix = wanted.endswith(".*") and name.startswith(wanted[:-1])
            if everything or wanted == name or prefix:
                selected[name] = attribute
    return selected
