"""Kafka's primitive wire types as construct classes, and the readers/writers they share.

Every reader takes a `FrameIO`: a BytesIO that also knows the frame it reads
(`view`, for zero-copy `records` slices) and its end (`end`, so that every length
or count is checked against the bytes actually remaining before anything is
allocated). Both the interpreted (`_parse`) and the compiled (`_emitparse`) paths
call the same module-level functions, so there is one implementation of each rule.

Errors: malformed input raises `DecodeError`; a value that cannot be encoded raises
`EncodeError`. (Short reads inside struct unpacking surface as `struct.error`; the
entry points in `weir.format.schema` turn every parse failure into `DecodeError`.)
"""

from __future__ import annotations

import io
import struct
import uuid
from typing import Any, Protocol

from construct import Construct, SizeofError

__all__ = [
    "BOOL",
    "BYTES",
    "COMPACT_BYTES",
    "COMPACT_NULLABLE_BYTES",
    "COMPACT_NULLABLE_STRING",
    "COMPACT_RECORDS",
    "COMPACT_STRING",
    "FLOAT64",
    "INT8",
    "INT16",
    "INT32",
    "INT64",
    "NULLABLE_BYTES",
    "NULLABLE_STRING",
    "RECORDS",
    "STRING",
    "UINT16",
    "UINT32",
    "UNSIGNED_VARINT",
    "UUID",
    "VARINT",
    "DecodeError",
    "EncodeError",
    "FixedType",
    "ChunkWriter",
    "FrameIO",
    "Sink",
    "KafkaType",
    "ZERO_UUID",
]

ZERO_UUID = uuid.UUID(int=0)

INT16_MAX = 0x7FFF
INT32_MAX = 0x7FFFFFFF
UVARINT_BYTES_MAX = 5

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")


class DecodeError(Exception):
    """Malformed input: truncated, oversized, or otherwise not a valid message."""


class EncodeError(ValueError):
    """A value that cannot be encoded in the requested type or version."""


# Array elements one frame may decode into. Byte checks alone would let a 100 MiB
# frame of 2-byte strings become 50 million Python objects (gigabytes); real
# requests (a follower fetching every partition, a big group's offset commit)
# stay far below this.
DECODE_ELEMENTS_MAX = 200_000


class FrameIO(io.BytesIO):
    """A parse stream over one frame: knows its end and keeps a view for zero-copy slices.

    A `memoryview` of a whole `bytes` object (what the server hands over) is read
    without copying; any other buffer is copied once into the stream, while
    `records` slices still come from the caller's buffer."""

    def __init__(
        self,
        frame: bytes | bytearray | memoryview,
        start: int = 0,
        elements_max: int = DECODE_ELEMENTS_MAX,
    ) -> None:
        view = memoryview(frame)
        if view.format != "B" or view.ndim != 1:
            view = view.cast("B")
        super().__init__(_shared_bytes(view) or view)
        self.view = view
        self.end = len(view)
        # Array elements this frame may still decode into Python objects.
        self.elements_left = elements_max
        self.seek(start)

    def remaining(self) -> int:
        return self.end - self.tell()


def _shared_bytes(view: memoryview) -> bytes | None:
    obj = view.obj
    if isinstance(obj, bytes) and len(obj) == view.nbytes and view.c_contiguous:
        return obj
    return None


class Sink(Protocol):
    """Where encoders write: io.BytesIO or ChunkWriter."""

    def write(self, data: bytes | bytearray | memoryview, /) -> int: ...


class ChunkWriter:
    """An encoding sink that keeps large buffers (record sets) as their own chunks.

    Small writes accumulate in a bytearray; a write of at least `ZERO_COPY_BYTES_MIN`
    bytes is kept by reference, so a Fetch response can be sent scatter-gather
    without copying stored record batches, or joined once into one `bytes`."""

    ZERO_COPY_BYTES_MIN = 4096

    __slots__ = ("_chunks", "_current", "size_bytes")

    def __init__(self) -> None:
        self._current = bytearray()
        self._chunks: list[bytes | bytearray | memoryview] = [self._current]
        self.size_bytes = 0

    def write(self, data: bytes | bytearray | memoryview, /) -> int:
        size = len(data)
        if size >= self.ZERO_COPY_BYTES_MIN and not isinstance(data, bytearray):
            self._chunks.append(data)
            self._current = bytearray()
            self._chunks.append(self._current)
        else:
            self._current += data
        self.size_bytes += size
        return size

    def first_chunk(self) -> bytearray:
        """The chunk holding the first bytes written (for patching a size prefix)."""
        first = self._chunks[0]
        assert isinstance(first, bytearray)
        return first

    def chunks(self) -> list[bytes | bytearray | memoryview]:
        return [chunk for chunk in self._chunks if len(chunk)]

    def getvalue(self) -> bytes:
        return b"".join(self._chunks)


# Readers ---------------------------------------------------------------------------


def check_remaining(stream: FrameIO, size_bytes: int, what: str) -> None:
    if size_bytes > stream.end - stream.tell():
        raise DecodeError(
            f"{what} of {size_bytes} bytes exceeds the {stream.end - stream.tell()} remaining"
        )


def read_exact(stream: FrameIO, size_bytes: int) -> bytes:
    data = stream.read(size_bytes)
    if len(data) != size_bytes:
        raise DecodeError(f"truncated: needed {size_bytes} bytes, found {len(data)}")
    return data


def read_uvarint(stream: FrameIO) -> int:
    """An unsigned varint of at most 5 bytes (Kafka's readUnsignedVarint)."""
    first = stream.read(1)
    if not first:
        raise DecodeError("truncated varint")
    byte = first[0]
    if byte < 0x80:
        return byte
    result = byte & 0x7F
    shift = 7
    while True:
        more = stream.read(1)
        if not more:
            raise DecodeError("truncated varint")
        byte = more[0]
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result
        shift += 7
        if shift >= 7 * UVARINT_BYTES_MAX:
            raise DecodeError("varint is longer than 5 bytes")


def read_varint(stream: FrameIO) -> int:
    raw = read_uvarint(stream)
    return (raw >> 1) ^ -(raw & 1)


def read_uuid(stream: FrameIO) -> uuid.UUID:
    return uuid.UUID(bytes=read_exact(stream, 16))


def _decode_utf8(data: bytes) -> str:
    try:
        return data.decode()
    except UnicodeDecodeError as exc:
        raise DecodeError(f"string is not UTF-8: {exc}") from exc


def read_string(stream: FrameIO) -> str:
    (length,) = _INT16.unpack(read_exact(stream, 2))
    if length < 0:
        raise DecodeError("null in a non-nullable string")
    check_remaining(stream, length, "string")
    return _decode_utf8(stream.read(length))


def read_nullable_string(stream: FrameIO) -> str | None:
    (length,) = _INT16.unpack(read_exact(stream, 2))
    if length < 0:
        return None
    check_remaining(stream, length, "string")
    return _decode_utf8(stream.read(length))


def read_compact_string(stream: FrameIO) -> str:
    length = read_uvarint(stream) - 1
    if length < 0:
        raise DecodeError("null in a non-nullable compact string")
    check_remaining(stream, length, "string")
    return _decode_utf8(stream.read(length))


def read_compact_nullable_string(stream: FrameIO) -> str | None:
    length = read_uvarint(stream) - 1
    if length < 0:
        return None
    check_remaining(stream, length, "string")
    return _decode_utf8(stream.read(length))


def read_bytes(stream: FrameIO) -> bytes:
    (length,) = _INT32.unpack(read_exact(stream, 4))
    if length < 0:
        raise DecodeError("null in non-nullable bytes")
    check_remaining(stream, length, "bytes")
    return stream.read(length)


def read_nullable_bytes(stream: FrameIO) -> bytes | None:
    (length,) = _INT32.unpack(read_exact(stream, 4))
    if length < 0:
        return None
    check_remaining(stream, length, "bytes")
    return stream.read(length)


def read_compact_bytes(stream: FrameIO) -> bytes:
    length = read_uvarint(stream) - 1
    if length < 0:
        raise DecodeError("null in non-nullable compact bytes")
    check_remaining(stream, length, "bytes")
    return stream.read(length)


def read_compact_nullable_bytes(stream: FrameIO) -> bytes | None:
    length = read_uvarint(stream) - 1
    if length < 0:
        return None
    check_remaining(stream, length, "bytes")
    return stream.read(length)


def _slice_records(stream: FrameIO, length: int) -> memoryview:
    check_remaining(stream, length, "records")
    start = stream.tell()
    stream.seek(start + length)
    return stream.view[start : start + length]


def read_records(stream: FrameIO) -> memoryview | None:
    """Nullable int32-length records: a zero-copy slice of the frame."""
    (length,) = _INT32.unpack(read_exact(stream, 4))
    if length < 0:
        return None
    return _slice_records(stream, length)


def read_compact_records(stream: FrameIO) -> memoryview | None:
    length = read_uvarint(stream) - 1
    if length < 0:
        return None
    return _slice_records(stream, length)


def read_array_count(stream: FrameIO, element_bytes_min: int, nullable: bool) -> int:
    """An int32 array count, -1 for null; checked against the bytes remaining."""
    (count,) = _INT32.unpack(read_exact(stream, 4))
    return _checked_count(stream, count, element_bytes_min, nullable)


def read_compact_array_count(stream: FrameIO, element_bytes_min: int, nullable: bool) -> int:
    """A compact (uvarint count + 1) array count, -1 for null."""
    return _checked_count(stream, read_uvarint(stream) - 1, element_bytes_min, nullable)


def _checked_count(stream: FrameIO, count: int, element_bytes_min: int, nullable: bool) -> int:
    if count < 0:
        if count == -1 and nullable:
            return -1
        raise DecodeError(f"invalid array count {count}")
    check_remaining(stream, count * max(1, element_bytes_min), f"array of {count} elements")
    if isinstance(stream, FrameIO):
        stream.elements_left -= count
        if stream.elements_left < 0:
            raise DecodeError(f"more than {DECODE_ELEMENTS_MAX} array elements in one frame")
    return count


# Writers ---------------------------------------------------------------------------


def write_uvarint(stream: Sink, value: int) -> None:
    if value < 0 or value > 0xFFFFFFFF:
        raise EncodeError(f"unsigned varint out of range: {value}")
    if value < 0x80:
        stream.write(bytes((value,)))
        return
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    stream.write(out)


def write_varint(stream: Sink, value: int) -> None:
    if not -(2**31) <= value < 2**31:
        raise EncodeError(f"varint out of range: {value}")
    write_uvarint(stream, ((value << 1) ^ (value >> 31)) & 0xFFFFFFFF)


def write_uuid(stream: Sink, value: Any) -> None:
    stream.write(uuid_bytes(value))


def uuid_bytes(value: Any) -> bytes:
    if value is None:
        return ZERO_UUID.bytes
    if isinstance(value, uuid.UUID):
        return value.bytes
    if isinstance(value, bytes | bytearray | memoryview) and len(value) == 16:
        return bytes(value)
    if isinstance(value, str):
        return uuid.UUID(value).bytes
    raise EncodeError(f"not a UUID: {value!r}")


def _utf8(value: Any) -> bytes:
    if not isinstance(value, str):
        raise EncodeError(f"not a string: {value!r}")
    return value.encode()


def write_string(stream: Sink, value: Any) -> None:
    data = _utf8(value)
    if len(data) > INT16_MAX:
        raise EncodeError(f"string of {len(data)} bytes is too long")
    stream.write(_INT16.pack(len(data)))
    stream.write(data)


def write_nullable_string(stream: Sink, value: Any) -> None:
    if value is None:
        stream.write(b"\xff\xff")
        return
    write_string(stream, value)


def write_compact_string(stream: Sink, value: Any) -> None:
    data = _utf8(value)
    write_uvarint(stream, len(data) + 1)
    stream.write(data)


def write_compact_nullable_string(stream: Sink, value: Any) -> None:
    if value is None:
        stream.write(b"\x00")
        return
    write_compact_string(stream, value)


def _buffer(value: Any) -> bytes | bytearray | memoryview:
    if isinstance(value, bytes | bytearray):
        return value
    if isinstance(value, memoryview):
        return value if value.format == "B" and value.ndim == 1 else value.cast("B")
    raise EncodeError(f"not a bytes-like value: {type(value).__name__}")


def write_bytes(stream: Sink, value: Any) -> None:
    data = _buffer(value)
    stream.write(_INT32.pack(len(data)))
    stream.write(data)


def write_nullable_bytes(stream: Sink, value: Any) -> None:
    if value is None:
        stream.write(b"\xff\xff\xff\xff")
        return
    write_bytes(stream, value)


def write_compact_bytes(stream: Sink, value: Any) -> None:
    data = _buffer(value)
    write_uvarint(stream, len(data) + 1)
    stream.write(data)


def write_compact_nullable_bytes(stream: Sink, value: Any) -> None:
    if value is None:
        stream.write(b"\x00")
        return
    write_compact_bytes(stream, value)


def write_array_count(stream: Sink, count: int) -> None:
    """int32 count; -1 for null."""
    stream.write(_INT32.pack(count))


def write_compact_array_count(stream: Sink, count: int) -> None:
    """uvarint count + 1; 0 for null (count -1)."""
    write_uvarint(stream, count + 1)


# Construct classes -----------------------------------------------------------------


class KafkaType(Construct):  # type: ignore[misc]
    """A Kafka wire type: knows its smallest encoding and its zero value."""

    kafka_name = "?"
    size_bytes_min = 1

    def __init__(self) -> None:
        super().__init__()
        self.flagbuildnone = True

    def zero(self) -> Any:
        """The value of a field of this type with no declared default."""
        return None

    def __repr__(self) -> str:
        return f"<{self.kafka_name}>"


class FixedType(KafkaType):
    """A fixed-size number: int8/16/32/64, uint16/32, float64, bool."""

    def __init__(self, kafka_name: str, format_char: str, zero: Any) -> None:
        super().__init__()
        self.kafka_name = kafka_name
        self.format_char = format_char
        self.packer = struct.Struct(">" + format_char)
        self.size_bytes_min = self.packer.size
        self._zero = zero

    def zero(self) -> Any:
        return self._zero

    def _parse(self, stream: FrameIO, context: Any, path: str) -> Any:
        return self.packer.unpack(read_exact(stream, self.packer.size))[0]

    def _build(self, obj: Any, stream: Sink, context: Any, path: str) -> Any:
        stream.write(self.packer.pack(obj))
        return obj

    def _sizeof(self, context: Any, path: str) -> int:
        return int(self.packer.size)

    def _emitparse(self, code: Any) -> str:
        name = f"fixed_{self.format_char.replace('?', 'bool')}"
        code.append(f"{name} = struct.Struct('>{self.format_char}')")
        return f"{name}.unpack(io.read({self.packer.size}))[0]"

    def _emitbuild(self, code: Any) -> str:
        name = f"fixed_{self.format_char.replace('?', 'bool')}"
        code.append(f"{name} = struct.Struct('>{self.format_char}')")
        return f"io.write({name}.pack(obj))"


class FunctionType(KafkaType):
    """A variable-size type read and written by a pair of module-level functions."""

    def __init__(
        self, kafka_name: str, reader: Any, writer: Any, size_bytes_min: int, zero: Any
    ) -> None:
        super().__init__()
        self.kafka_name = kafka_name
        self.reader = reader
        self.writer = writer
        self.size_bytes_min = size_bytes_min
        self._zero = zero

    def zero(self) -> Any:
        return self._zero

    def _parse(self, stream: FrameIO, context: Any, path: str) -> Any:
        return self.reader(stream)

    def _build(self, obj: Any, stream: Sink, context: Any, path: str) -> Any:
        self.writer(stream, obj)
        return obj

    def _sizeof(self, context: Any, path: str) -> int:
        raise SizeofError(path=path)

    def _emitparse(self, code: Any) -> str:
        code.append(f"from weir.format.primitives import {self.reader.__name__}")
        return f"{self.reader.__name__}(io)"

    def _emitbuild(self, code: Any) -> str:
        code.append(f"from weir.format.primitives import {self.writer.__name__}")
        return f"{self.writer.__name__}(io, obj)"


INT8 = FixedType("int8", "b", 0)
INT16 = FixedType("int16", "h", 0)
INT32 = FixedType("int32", "i", 0)
INT64 = FixedType("int64", "q", 0)
UINT16 = FixedType("uint16", "H", 0)
UINT32 = FixedType("uint32", "I", 0)
FLOAT64 = FixedType("float64", "d", 0.0)
BOOL = FixedType("bool", "?", False)

UUID = FunctionType("uuid", read_uuid, write_uuid, 16, ZERO_UUID)
UNSIGNED_VARINT = FunctionType("uvarint", read_uvarint, write_uvarint, 1, 0)
VARINT = FunctionType("varint", read_varint, write_varint, 1, 0)
STRING = FunctionType("string", read_string, write_string, 2, "")
NULLABLE_STRING = FunctionType(
    "nullable_string", read_nullable_string, write_nullable_string, 2, None
)
COMPACT_STRING = FunctionType("compact_string", read_compact_string, write_compact_string, 1, "")
COMPACT_NULLABLE_STRING = FunctionType(
    "compact_nullable_string", read_compact_nullable_string, write_compact_nullable_string, 1, None
)
BYTES = FunctionType("bytes", read_bytes, write_bytes, 4, b"")
NULLABLE_BYTES = FunctionType("nullable_bytes", read_nullable_bytes, write_nullable_bytes, 4, None)
COMPACT_BYTES = FunctionType("compact_bytes", read_compact_bytes, write_compact_bytes, 1, b"")
COMPACT_NULLABLE_BYTES = FunctionType(
    "compact_nullable_bytes", read_compact_nullable_bytes, write_compact_nullable_bytes, 1, None
)
RECORDS = FunctionType("records", read_records, write_nullable_bytes, 4, None)
COMPACT_RECORDS = FunctionType(
    "compact_records", read_compact_records, write_compact_nullable_bytes, 1, None
)
