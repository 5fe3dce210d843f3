"""Record-batch compression codecs, with decompression bounded by an output limit.

Codec numbers are Kafka's (the low three bits of a batch's attributes):
0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd.

`decompress` never holds more than `output_bytes_max` (plus one internal chunk) of
output: every codec is driven incrementally and stops as soon as the bound is passed.

Snappy: Java producers send the xerial-framed format (a 16-byte header, then
big-endian int32-length-prefixed raw blocks); librdkafka and kafka-python may send
a single raw snappy block. Both are accepted. `compress` emits one raw block, which
every client decodes (Java's xerial reader falls back to raw when the magic is absent,
and librdkafka / kafka-python / aiokafka detect the magic).
"""

from __future__ import annotations

import enum
import io
import struct
import zlib

import lz4.frame
import snappy
import zstandard

__all__ = [
    "Codec",
    "CompressionError",
    "CorruptDataError",
    "OutputLimitError",
    "UnsupportedCodecError",
    "compress",
    "decompress",
]

_CHUNK_BYTES = 64 * 1024
_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER_BYTES = 16
_INT32 = struct.Struct(">i")


class Codec(enum.IntEnum):
    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


class CompressionError(ValueError):
    """Base of every error raised by this module."""


class UnsupportedCodecError(CompressionError):
    pass


class CorruptDataError(CompressionError):
    pass


class OutputLimitError(CompressionError):
    """Decompressing would produce more than `output_bytes_max` bytes."""


Buffer = bytes | bytearray | memoryview


def compress(codec: int, data: Buffer) -> bytes:
    """Compress `data` with Kafka codec number `codec`."""
    match codec:
        case Codec.NONE:
            return bytes(data)
        case Codec.GZIP:
            return _gzip_compress(data)
        case Codec.SNAPPY:
            return bytes(snappy.compress(bytes(data)))
        case Codec.LZ4:
            # Independent blocks: Java's KafkaLZ4BlockInputStream refuses linked ones.
            return bytes(lz4.frame.compress(bytes(data), block_linked=False))
        case Codec.ZSTD:
            return zstandard.ZstdCompressor(level=3).compress(bytes(data))
    raise UnsupportedCodecError(f"unknown compression codec {codec}")


def decompress(codec: int, data: Buffer, *, output_bytes_max: int) -> bytes:
    """Decompress `data`; raise OutputLimitError past `output_bytes_max` bytes."""
    try:
        return _decompress(codec, data, output_bytes_max)
    except CompressionError:
        raise
    except (zlib.error, snappy.UncompressError, RuntimeError, zstandard.ZstdError) as exc:
        raise CorruptDataError(f"corrupt {_codec_name(codec)} data: {exc}") from exc
    except (ValueError, OSError, EOFError) as exc:
        raise CorruptDataError(f"corrupt {_codec_name(codec)} data: {exc}") from exc


def _codec_name(codec: int) -> str:
    try:
        return Codec(codec).name.lower()
    except ValueError:
        return f"codec {codec}"


def _decompress(codec: int, data: Buffer, output_bytes_max: int) -> bytes:
    match codec:
        case Codec.NONE:
            _check_output(len(data), output_bytes_max)
            return bytes(data)
        case Codec.GZIP:
            return _gzip_decompress(data, output_bytes_max)
        case Codec.SNAPPY:
            return _snappy_decompress(data, output_bytes_max)
        case Codec.LZ4:
            return _lz4_decompress(data, output_bytes_max)
        case Codec.ZSTD:
            return _zstd_decompress(data, output_bytes_max)
    raise UnsupportedCodecError(f"unknown compression codec {codec}")


def _check_output(size_bytes: int, output_bytes_max: int) -> None:
    if size_bytes > output_bytes_max:
        raise OutputLimitError(f"decompressed data exceeds the limit of {output_bytes_max} bytes")


# gzip ------------------------------------------------------------------------------


def _gzip_compress(data: Buffer) -> bytes:
    compressor = zlib.compressobj(6, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    return compressor.compress(data) + compressor.flush()


def _gzip_decompress(data: Buffer, output_bytes_max: int) -> bytes:
    """Inflate one or more concatenated gzip members (zlib streams are accepted too)."""
    out = bytearray()
    pending: bytes | memoryview = memoryview(data)
    while pending:
        inflater = zlib.decompressobj(32 + zlib.MAX_WBITS)
        pending = _inflate_member(inflater, pending, out, output_bytes_max)
        if not inflater.eof:
            raise CorruptDataError("truncated gzip data")
    return bytes(out)


def _inflate_member(
    inflater: zlib._Decompress, data: bytes | memoryview, out: bytearray, output_bytes_max: int
) -> bytes:
    """Inflate until the member ends or no progress is made; return the bytes after it."""
    pending = data
    while not inflater.eof:
        chunk = inflater.decompress(pending, _chunk_bound(out, output_bytes_max))
        out += chunk
        _check_output(len(out), output_bytes_max)
        pending = inflater.unconsumed_tail
        if not pending and not chunk:
            break
    return inflater.unused_data


def _chunk_bound(out: bytearray, output_bytes_max: int) -> int:
    """Ask for at most one byte past the limit, so exceeding it is detected."""
    return max(1, min(_CHUNK_BYTES, output_bytes_max - len(out) + 1))


# snappy ----------------------------------------------------------------------------


def _snappy_decompress(data: Buffer, output_bytes_max: int) -> bytes:
    view = memoryview(data)
    if bytes(view[: len(_XERIAL_MAGIC)]) == _XERIAL_MAGIC:
        return _xerial_decompress(view, output_bytes_max)
    return _snappy_block(view, output_bytes_max)


def _xerial_decompress(view: memoryview, output_bytes_max: int) -> bytes:
    if len(view) < _XERIAL_HEADER_BYTES:
        raise CorruptDataError("truncated xerial snappy header")
    out = bytearray()
    pos = _XERIAL_HEADER_BYTES
    while pos < len(view):
        if len(view) - pos < 4:
            raise CorruptDataError("truncated xerial snappy block length")
        (block_bytes,) = _INT32.unpack_from(view, pos)
        pos += 4
        if block_bytes < 0 or block_bytes > len(view) - pos:
            raise CorruptDataError("xerial snappy block length exceeds the input")
        out += _snappy_block(view[pos : pos + block_bytes], output_bytes_max - len(out))
        pos += block_bytes
    return bytes(out)


def _snappy_block(block: memoryview, output_bytes_max: int) -> bytes:
    """One raw snappy block; its declared length is checked before inflating."""
    _check_output(_snappy_declared_length(block), output_bytes_max)
    return bytes(snappy.uncompress(bytes(block)))


def _snappy_declared_length(block: memoryview) -> int:
    """The uncompressed length: a little-endian base-128 varint preamble."""
    length = 0
    for i in range(min(5, len(block))):
        byte = block[i]
        length |= (byte & 0x7F) << (7 * i)
        if byte < 0x80:
            return length
    raise CorruptDataError("bad snappy length preamble")


# lz4 -------------------------------------------------------------------------------


def _lz4_decompress(data: Buffer, output_bytes_max: int) -> bytes:
    """Inflate one or more concatenated LZ4 frames."""
    out = bytearray()
    pending = bytes(data)
    while pending:
        decompressor = lz4.frame.LZ4FrameDecompressor()
        out += decompressor.decompress(pending, _chunk_bound(out, output_bytes_max))
        _check_output(len(out), output_bytes_max)
        while not decompressor.eof and not decompressor.needs_input:
            out += decompressor.decompress(b"", _chunk_bound(out, output_bytes_max))
            _check_output(len(out), output_bytes_max)
        if not decompressor.eof:
            raise CorruptDataError("truncated lz4 frame")
        pending = decompressor.unused_data
    return bytes(out)


# zstd ------------------------------------------------------------------------------


def _zstd_decompress(data: Buffer, output_bytes_max: int) -> bytes:
    # The streaming reader stops quietly at truncated input, so the frame structure is
    # walked first: a truncated frame or trailing garbage is an error, not short output.
    _check_zstd_frames(memoryview(data))
    out = bytearray()
    source = io.BytesIO(data)
    reader = zstandard.ZstdDecompressor().stream_reader(
        source, read_across_frames=True, closefd=False
    )
    with reader:
        while True:
            chunk = reader.read(_chunk_bound(out, output_bytes_max))
            if not chunk:
                break
            out += chunk
            _check_output(len(out), output_bytes_max)
    return bytes(out)


_ZSTD_MAGIC = 0xFD2FB528
_ZSTD_SKIPPABLE_MASK = 0xFFFFFFF0
_ZSTD_SKIPPABLE_MAGIC = 0x184D2A50
_UINT32_LE = struct.Struct("<I")


def _check_zstd_frames(view: memoryview) -> None:
    """Raise unless `view` is a sequence of complete zstd (or skippable) frames."""
    if not view:
        raise CorruptDataError("empty zstd input")
    pos = 0
    while pos < len(view):
        _need(view, pos, 4)
        (magic,) = _UINT32_LE.unpack_from(view, pos)
        pos += 4
        if magic & _ZSTD_SKIPPABLE_MASK == _ZSTD_SKIPPABLE_MAGIC:
            _need(view, pos, 4)
            (skip_bytes,) = _UINT32_LE.unpack_from(view, pos)
            pos = _need(view, pos + 4, skip_bytes)
        elif magic == _ZSTD_MAGIC:
            pos = _skip_zstd_frame(view, pos)
        else:
            raise CorruptDataError("bad zstd frame magic")


def _skip_zstd_frame(view: memoryview, pos: int) -> int:
    _need(view, pos, 1)
    descriptor = view[pos]
    single_segment = bool(descriptor & 0x20)
    content_size_flag = descriptor >> 6
    dict_id_bytes = (0, 1, 2, 4)[descriptor & 3]
    content_size_bytes = (1 if single_segment else 0, 2, 4, 8)[content_size_flag]
    window_bytes = 0 if single_segment else 1
    pos = _need(view, pos + 1, window_bytes + dict_id_bytes + content_size_bytes)
    last_block = False
    while not last_block:
        _need(view, pos, 3)
        block_header = view[pos] | (view[pos + 1] << 8) | (view[pos + 2] << 16)
        last_block = bool(block_header & 1)
        block_type = (block_header >> 1) & 3
        block_bytes = block_header >> 3
        if block_type == 3:
            raise CorruptDataError("reserved zstd block type")
        pos = _need(view, pos + 3, 1 if block_type == 1 else block_bytes)
    checksum_bytes = 4 if descriptor & 0x04 else 0
    return _need(view, pos, checksum_bytes)


def _need(view: memoryview, pos: int, size_bytes: int) -> int:
    """Return pos + size_bytes, or raise if the input is shorter than that."""
    end = pos + size_bytes
    if end > len(view):
        raise CorruptDataError("truncated zstd frame")
    return end
