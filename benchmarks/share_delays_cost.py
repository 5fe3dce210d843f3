"""What delays and expiry add to a share fetch's acquisition, in CPU per fetch.

A share fetch reads whole batches from the log and acquires records from them; for a
group without Weir's delays or expiry the driver looks at batch headers only
(`share_fetch._batches`), with them it also derives the records' times
(`weir.sharecoord.delivery_times`), decoding records only where they can matter. This
times, per share fetch of RECORDS records (batches of BATCH_RECORDS, VALUE_BYTES values),
the read side (batches and times) and the acquisition (`acquire_records` on a fresh
partition), in µs, for:

- off: a group without delays or expiry (Kafka's behaviour, the default);
- headers, none present: `weir.share.record.headers.enable`, no record carries one;
- headers, 1 in 10 delayed: every batch holds a `weir.delay.ms` header (decoded);
- headers, gzip, none present: compressed batches must be inflated to know;
- ttl, fresh: a group TTL that no batch is near (decided from batch headers);
- ttl, boundary in every batch: each batch decoded for its records' timestamps.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/share_delays_cost.py
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

from weir.broker.handlers.share_fetch import _batches
from weir.format.compression import Codec
from weir.format.record_batch import build_batch
from weir.sharecoord.delivery_times import DeliveryPolicy, delivery_times
from weir.sharecoord.share_partition import SharePartition, ShareSettings

RECORDS = 500
BATCH_RECORDS = 100
VALUE_BYTES = 100
NOW_MS = 1_700_000_000_000
BYTES_MAX = 64 << 20


def log(*, delayed_every: int = 0, compression: int = 0, spread_ms: int = 0) -> bytes:
    """RECORDS records in batches; every `delayed_every`-th with a delay header;
    timestamps NOW - 60 s, spread over `spread_ms` within each batch."""
    out = bytearray()
    for base in range(0, RECORDS, BATCH_RECORDS):
        records: list[Any] = []
        for i in range(BATCH_RECORDS):
            offset = base + i
            headers = [("trace-id", b"abc123")]
            if delayed_every and offset % delayed_every == 0:
                headers.append(("weir.delay.ms", b"120000"))
            ts = NOW_MS - 60_000 + (spread_ms * i) // BATCH_RECORDS
            records.append((b"key-%d" % offset, b"x" * VALUE_BYTES, headers, ts))
        out += build_batch(records, base_offset=base, compression=compression)
    return bytes(out)


def timed(fn: Callable[[], object], rounds: int) -> float:
    """Median µs of `fn` over `rounds` runs of 20 calls each."""
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(20):
            fn()
        samples.append((time.perf_counter() - start) / 20 * 1e6)
    return statistics.median(samples)


def case(name: str, records: bytes, policy: DeliveryPolicy, rounds: int) -> None:
    def read() -> tuple[Any, Any]:
        if not policy.active:
            return _batches(records), None
        return delivery_times(records, policy, NOW_MS, uncompressed_bytes_max=BYTES_MAX)

    batches, times = read()
    settings = ShareSettings()

    def acquire() -> object:
        partition = SharePartition.starting_at(0, settings)
        return partition.acquire_records(
            "m",
            batches,
            max_records=RECORDS,
            record_limit=False,
            read_offset=0,
            now_ms=NOW_MS,
            times=times,
        )

    read_us, acquire_us = timed(read, rounds), timed(acquire, rounds)
    total = read_us + acquire_us
    print(
        f"{name:34} read {read_us:8.1f} µs  acquire {acquire_us:7.1f} µs  "
        f"total {total:8.1f} µs  ({total / RECORDS:5.2f} µs/record)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=15)
    rounds = parser.parse_args().rounds
    print(f"{RECORDS} records a fetch, batches of {BATCH_RECORDS}, {VALUE_BYTES}-byte values")
    headers = DeliveryPolicy(headers=True, delay_max_ms=900_000)
    case("off (default)", log(), DeliveryPolicy(), rounds)
    case("headers, none present", log(), headers, rounds)
    case("headers, 1 in 10 delayed", log(delayed_every=10), headers, rounds)
    case("headers, gzip, none present", log(compression=Codec.GZIP), headers, rounds)
    case("ttl 1 h, fresh", log(), DeliveryPolicy(record_ttl_ms=3_600_000), rounds)
    case(
        "ttl, boundary in every batch",
        log(spread_ms=20_000),
        DeliveryPolicy(record_ttl_ms=50_000),
        rounds,
    )


if __name__ == "__main__":
    main()
