"""Progress lines on stderr, timestamped (the results go to stdout and JSON)."""

from __future__ import annotations

import sys
import time


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)
