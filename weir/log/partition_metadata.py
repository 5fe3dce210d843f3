"""`partition.metadata`: which topic a partition directory belongs to.

Kafka writes this file in every partition directory so a directory left from
an older topic of the same name (deleted, then created again) is never taken
for the current one. Weir's holds the same two lines as Kafka's, plus the topic
name (directory names of long topic names are not enough to tell them apart):

    version: 0
    topic_id: <the topic id, Kafka's url-safe base64 form>
    topic_name: <the topic name>

Written once, when the partition is created: temp file, fsync, rename, fsync
the directory. A missing file means a directory from before Weir wrote them.
"""

from __future__ import annotations

import base64
import logging
import uuid
from dataclasses import dataclass
from pathlib import Path

from weir.log.checkpoint import write_file_atomically

log = logging.getLogger(__name__)

PARTITION_METADATA_FILE_NAME = "partition.metadata"
PARTITION_METADATA_VERSION = 0
PARTITION_METADATA_BYTES_MAX = 4096


class PartitionMetadataError(Exception):
    """The file exists but cannot be read or parsed."""


@dataclass(frozen=True)
class PartitionIdentity:
    topic_id: uuid.UUID
    topic_name: str


def encode_topic_id(topic_id: uuid.UUID) -> str:
    return base64.urlsafe_b64encode(topic_id.bytes).decode("ascii").rstrip("=")


def decode_topic_id(text: str) -> uuid.UUID:
    padded = text + "=" * (-len(text) % 4)
    raw = base64.urlsafe_b64decode(padded.encode("ascii"))
    if len(raw) != 16:
        raise ValueError(f"topic id {text!r} is not 16 bytes")
    return uuid.UUID(bytes=raw)


def write_partition_metadata(directory: Path, identity: PartitionIdentity) -> None:
    text = (
        f"version: {PARTITION_METADATA_VERSION}\n"
        f"topic_id: {encode_topic_id(identity.topic_id)}\n"
        f"topic_name: {identity.topic_name}\n"
    )
    write_file_atomically(directory / PARTITION_METADATA_FILE_NAME, text.encode("utf-8"))


def read_partition_metadata(directory: Path) -> PartitionIdentity | None:
    """The directory's identity; None when it has no `partition.metadata`.
    Raises PartitionMetadataError when the file is unreadable or malformed."""
    path = directory / PARTITION_METADATA_FILE_NAME
    try:
        with open(path, "rb") as f:
            data = f.read(PARTITION_METADATA_BYTES_MAX + 1)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise PartitionMetadataError(f"{path}: {exc.strerror or exc}") from exc
    if len(data) > PARTITION_METADATA_BYTES_MAX:
        raise PartitionMetadataError(f"{path}: larger than {PARTITION_METADATA_BYTES_MAX} bytes")
    try:
        fields = _parse_fields(data.decode("utf-8"))
        if int(fields["version"]) != PARTITION_METADATA_VERSION:
            raise ValueError(f"unknown version {fields['version']}")
        return PartitionIdentity(decode_topic_id(fields["topic_id"]), fields["topic_name"])
    except (UnicodeDecodeError, ValueError, KeyError) as exc:
        raise PartitionMetadataError(f"{path}: {exc}") from exc


def read_partition_metadata_or_none(directory: Path) -> PartitionIdentity | None:
    """As `read_partition_metadata`, with an unreadable file logged and read as None."""
    try:
        return read_partition_metadata(directory)
    except PartitionMetadataError as exc:
        log.warning("%s", exc)
        return None


def _parse_fields(text: str) -> dict[str, str]:
    fields = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        name, sep, value = line.partition(":")
        if not sep:
            raise ValueError(f"line {line!r} is not 'name: value'")
        fields[name.strip()] = value.strip()
    return fields
