"""One process per data directory: `weir serve` and `weir repair` both take the lock."""

from __future__ import annotations

import fcntl
from pathlib import Path
from typing import IO

from weir.broker.config import ConfigError

LOCK_FILE_NAME = ".lock"


def lock_data_dir(data_dir: Path, setting: str = "--data-dir") -> IO[bytes]:
    """Lock `data_dir` for this process; errors name `setting`, where it was given."""
    lock = open(data_dir / LOCK_FILE_NAME, "wb")  # noqa: SIM115 - held for the process lifetime
    try:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        lock.close()
        raise ConfigError(f"{setting}: {data_dir} is in use by another weir process") from None
    return lock
