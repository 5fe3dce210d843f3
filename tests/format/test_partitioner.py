import pytest

from weir.format.partitioner import murmur2, partition_for_key

# Kafka's own vectors: UtilsTest.testMurmur2 (clients/src/test/java/.../utils/UtilsTest.java),
# plus short keys cross-checked by Akka's Murmur2Spec against Kafka's implementation.
KAFKA_MURMUR2_VECTORS = [
    (b"21", -973932308),
    (b"foobar", -790332482),
    (b"a-little-bit-long-string", -985981536),
    (b"a-little-bit-longer-string", -1486304829),
    (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
    (b"abc", 479470107),
    (b"1", -1993445489),
    (b"12", 126087238),
    (b"123", -267702483),
    (b"1234", -1614185708),
    (b"12345", -1188365604),
]


@pytest.mark.parametrize(("data", "expected"), KAFKA_MURMUR2_VECTORS)
def test_murmur2_matches_kafka_test_vectors(data: bytes, expected: int) -> None:
    assert murmur2(data) == expected


def test_murmur2_of_empty_key_is_a_signed_32_bit_int() -> None:
    assert -(2**31) <= murmur2(b"") < 2**31


def test_partition_is_positive_hash_modulo_partition_count() -> None:
    # toPositive(-973932308) = -973932308 & 0x7fffffff = 1173551340
    assert partition_for_key(b"21", 1000) == 1173551340 % 1000
    assert partition_for_key(b"abc", 7) == 479470107 % 7


def test_every_key_lands_inside_the_partition_range() -> None:
    for i in range(500):
        assert 0 <= partition_for_key(str(i).encode(), 3) < 3


def test_partition_count_must_be_positive() -> None:
    with pytest.raises(ValueError):
        partition_for_key(b"k", 0)
