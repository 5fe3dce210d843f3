"""Codecs: round trips, bounded output, xerial snappy, corrupt input."""

from __future__ import annotations

import contextlib
import os
import random
import struct
import zlib

import pytest
import snappy

from weir.format.compression import (
    Codec,
    CompressionError,
    CorruptDataError,
    OutputLimitError,
    UnsupportedCodecError,
    compress,
    decompress,
)

PAYLOADS = [b"", b"x", os.urandom(3000), b"kafka " * 50_000, os.urandom(70_000) * 3]


@pytest.mark.parametrize("codec", list(Codec))
@pytest.mark.parametrize("payload", PAYLOADS, ids=lambda p: f"{len(p)}B")
def test_every_codec_round_trips(codec: Codec, payload: bytes) -> None:
    compressed = compress(codec, payload)
    assert decompress(codec, compressed, output_bytes_max=len(payload)) == payload
    assert decompress(codec, memoryview(compressed), output_bytes_max=len(payload)) == payload


@pytest.mark.parametrize("codec", list(Codec))
def test_output_one_byte_over_the_bound_is_rejected(codec: Codec) -> None:
    payload = b"kafka " * 50_000
    with pytest.raises(OutputLimitError):
        decompress(codec, compress(codec, payload), output_bytes_max=len(payload) - 1)


@pytest.mark.parametrize("codec", [Codec.GZIP, Codec.SNAPPY, Codec.LZ4, Codec.ZSTD])
def test_a_compression_bomb_stops_at_the_bound(codec: Codec) -> None:
    bomb = compress(codec, bytes(64 << 20))
    assert len(bomb) < 4 << 20
    with pytest.raises(OutputLimitError):
        decompress(codec, bomb, output_bytes_max=1 << 20)


def test_output_limit_error_is_a_value_error() -> None:
    assert issubclass(OutputLimitError, ValueError)
    assert issubclass(CorruptDataError, ValueError)


def _xerial(payload: bytes, block_bytes: int) -> bytes:
    """Java's xerial SnappyOutputStream framing: magic, version, compat, then blocks."""
    out = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    for start in range(0, len(payload), block_bytes):
        block = snappy.compress(payload[start : start + block_bytes])
        out += struct.pack(">i", len(block)) + block
    return out


def test_snappy_accepts_xerial_framing() -> None:
    payload = os.urandom(1000) * 100
    framed = _xerial(payload, 32 * 1024)
    assert decompress(Codec.SNAPPY, framed, output_bytes_max=len(payload)) == payload


def test_xerial_snappy_output_is_bounded_across_blocks() -> None:
    payload = bytes(200_000)
    with pytest.raises(OutputLimitError):
        decompress(Codec.SNAPPY, _xerial(payload, 32 * 1024), output_bytes_max=100_000)


@pytest.mark.parametrize(
    "framed",
    [
        b"\x82SNAPPY\x00\x00\x00\x00\x01",  # short header
        b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1) + b"\x00\x00",  # short block length
        b"\x82SNAPPY\x00" + struct.pack(">iii", 1, 1, 1000) + b"abc",  # block beyond input
        b"\x82SNAPPY\x00" + struct.pack(">iii", 1, 1, -1),  # negative block length
    ],
)
def test_malformed_xerial_snappy_is_rejected(framed: bytes) -> None:
    with pytest.raises(CorruptDataError):
        decompress(Codec.SNAPPY, framed, output_bytes_max=1 << 20)


def test_snappy_declared_length_is_checked_before_inflating() -> None:
    # A raw block claiming 2**31 bytes of output.
    with pytest.raises(OutputLimitError):
        decompress(Codec.SNAPPY, b"\x80\x80\x80\x80\x08\x00", output_bytes_max=1 << 20)


@pytest.mark.parametrize("codec", [Codec.GZIP, Codec.SNAPPY, Codec.LZ4, Codec.ZSTD])
def test_corrupt_and_truncated_input_is_rejected(codec: Codec) -> None:
    compressed = compress(codec, os.urandom(5000))
    for broken in (b"garbage" * 10, compressed[: len(compressed) // 2], compressed[:-1]):
        with pytest.raises(CompressionError):
            decompress(codec, broken, output_bytes_max=1 << 20)


def test_zstd_trailing_garbage_is_rejected() -> None:
    with pytest.raises(CorruptDataError):
        decompress(Codec.ZSTD, compress(Codec.ZSTD, b"abc") + b"junk", output_bytes_max=100)


def test_concatenated_gzip_members_and_zlib_streams_are_accepted() -> None:
    two = compress(Codec.GZIP, b"abc") + compress(Codec.GZIP, b"def")
    assert decompress(Codec.GZIP, two, output_bytes_max=6) == b"abcdef"
    assert decompress(Codec.GZIP, zlib.compress(b"xyz"), output_bytes_max=3) == b"xyz"


def test_unknown_codec_is_rejected() -> None:
    with pytest.raises(UnsupportedCodecError):
        compress(5, b"x")
    with pytest.raises(UnsupportedCodecError):
        decompress(7, b"x", output_bytes_max=10)


@pytest.mark.parametrize("codec", list(Codec))
def test_random_input_raises_only_compression_errors(codec: Codec) -> None:
    rng = random.Random(int(codec))
    valid = compress(codec, b"abc" * 1000)
    for _ in range(300):
        if rng.random() < 0.5:
            data = rng.randbytes(rng.randint(0, 100))
        else:
            damaged = bytearray(valid)
            damaged[rng.randrange(len(damaged))] = rng.randrange(256)
            data = bytes(damaged)
        with contextlib.suppress(CompressionError):
            decompress(codec, data, output_bytes_max=1 << 16)


def test_lz4_frames_use_independent_blocks_as_java_requires() -> None:
    """Java's KafkaLZ4BlockInputStream refuses frames whose blocks are linked (FLG bit 5
    clear): "Dependent block stream is unsupported"."""
    frame = compress(Codec.LZ4, bytes(range(256)) * 2048)  # 512 KiB: several blocks
    assert frame[:4] == b"\x04\x22\x4d\x18"  # the LZ4 frame magic
    assert frame[4] & 0x20, "block independence flag"
    assert decompress(Codec.LZ4, frame, output_bytes_max=1 << 20) == bytes(range(256)) * 2048
