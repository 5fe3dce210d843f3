"""Wall-clock jumps for one process, for the fault run: a small LD_PRELOAD library
that adds an offset, read from a file, to CLOCK_REALTIME and nothing else.

    shift = ClockShift.build(work_dir)      # compiles the library with the C compiler
    WeirProcess(..., extra_env=shift.environment)
    shift.set_offset_s(3600)                 # the process's wall clock jumps 1 h ahead

The library wraps `clock_gettime` (CLOCK_REALTIME, its coarse variant and
CLOCK_TAI), `gettimeofday` and `time`: Python's `time.time()`, `time.time_ns()` and
`datetime.now()` all read CLOCK_REALTIME through `clock_gettime`. CLOCK_MONOTONIC and
every sleep or timeout are untouched, as when NTP or an operator steps a real
machine's clock. The offset file holds whole or fractional seconds (`3600`,
`-3600`); the library reads it again at most every 100 ms of monotonic time, so a
jump reaches the process within 0.1 s.

Why not Debian's libfaketime (`faketime`): with FAKETIME_DONT_FAKE_MONOTONIC=1 its
0.9.10 makes Python's `time.sleep` fail with EINVAL (it rewrites the absolute
CLOCK_MONOTONIC deadline of `clock_nanosleep`), and without that setting it moves
the monotonic clock as well, which a real clock step does not.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

OFFSET_FILE_VARIABLE = "FAULT_RUN_CLOCK_OFFSET_FILE"
COMPILE_TIMEOUT_S = 60

_SOURCE = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

typedef int (*clock_gettime_fn)(clockid_t, struct timespec *);

static _Atomic(clock_gettime_fn) real_clock_gettime;
static _Atomic long long offset_ns;
static _Atomic long long next_read_ns;

static clock_gettime_fn real(void) {
    clock_gettime_fn fn = atomic_load(&real_clock_gettime);
    if (fn == NULL) {
        fn = (clock_gettime_fn)dlsym(RTLD_NEXT, "clock_gettime");
        atomic_store(&real_clock_gettime, fn);
    }
    return fn;
}

/* Seconds as text ("3600", "-3600", "1.5") to nanoseconds, without stdio or malloc. */
static long long parse_ns(const char *text) {
    long long sign = 1, whole = 0, fraction = 0, scale = 1000000000LL;
    while (*text == ' ' || *text == '+') text++;
    if (*text == '-') { sign = -1; text++; }
    while (*text >= '0' && *text <= '9') whole = whole * 10 + (*text++ - '0');
    if (*text == '.') {
        text++;
        while (*text >= '0' && *text <= '9' && scale > 1) {
            scale /= 10;
            fraction += (*text++ - '0') * scale;
        }
    }
    return sign * (whole * 1000000000LL + fraction);
}

static void refresh(void) {
    struct timespec now;
    if (real()(CLOCK_MONOTONIC, &now) != 0) return;
    long long now_ns = now.tv_sec * 1000000000LL + now.tv_nsec;
    if (now_ns < atomic_load(&next_read_ns)) return;
    atomic_store(&next_read_ns, now_ns + 100000000LL);
    const char *path = getenv("FAULT_RUN_CLOCK_OFFSET_FILE");
    if (path == NULL) return;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    char buffer[64];
    ssize_t length = read(fd, buffer, sizeof buffer - 1);
    close(fd);
    if (length <= 0) return;
    buffer[length] = 0;
    atomic_store(&offset_ns, parse_ns(buffer));
}

int clock_gettime(clockid_t clock, struct timespec *value) {
    int result = real()(clock, value);
    if (result != 0 || value == NULL) return result;
    if (clock != CLOCK_REALTIME && clock != CLOCK_REALTIME_COARSE && clock != CLOCK_TAI)
        return result;
    refresh();
    long long shifted = value->tv_sec * 1000000000LL + value->tv_nsec + atomic_load(&offset_ns);
    value->tv_sec = shifted / 1000000000LL;
    value->tv_nsec = shifted % 1000000000LL;
    if (value->tv_nsec < 0) { value->tv_nsec += 1000000000LL; value->tv_sec -= 1; }
    return result;
}

int gettimeofday(struct timeval *restrict value, void *restrict zone) {
    (void)zone;
    struct timespec now;
    int result = clock_gettime(CLOCK_REALTIME, &now);
    if (result == 0 && value != NULL) {
        value->tv_sec = now.tv_sec;
        value->tv_usec = now.tv_nsec / 1000;
    }
    return result;
}

time_t time(time_t *value) {
    struct timespec now;
    if (clock_gettime(CLOCK_REALTIME, &now) != 0) return (time_t)-1;
    if (value != NULL) *value = now.tv_sec;
    return now.tv_sec;
}
"""


def compiler() -> str:
    for name in ("cc", "gcc"):
        path = shutil.which(name)
        if path is not None:
            return path
    raise RuntimeError(
        "clock faults need a C compiler to build their LD_PRELOAD library: "
        "apt-get install gcc (or leave the clock kinds out with --kinds)"
    )


@dataclass
class ClockShift:
    library: Path
    offset_file: Path

    @classmethod
    def build(cls, work_dir: Path) -> ClockShift:
        """Compile the library into `work_dir`, with an offset file holding 0."""
        work_dir.mkdir(parents=True, exist_ok=True)
        source = work_dir / "clock_shift.c"
        source.write_text(_SOURCE)
        library = work_dir / "clock_shift.so"
        subprocess.run(
            [compiler(), "-shared", "-fPIC", "-O2", "-o", str(library), str(source), "-ldl"],
            check=True,
            capture_output=True,
            timeout=COMPILE_TIMEOUT_S,
        )
        shift = cls(library, work_dir / "clock_offset_s")
        shift.set_offset_s(0)
        return shift

    @property
    def environment(self) -> dict[str, str]:
        """What a process needs in its environment to run on the shifted clock."""
        preload = os.environ.get("LD_PRELOAD")
        library = str(self.library) if not preload else f"{self.library}:{preload}"
        return {"LD_PRELOAD": library, OFFSET_FILE_VARIABLE: str(self.offset_file)}

    def set_offset_s(self, offset_s: float) -> None:
        """The shifted processes' wall clock is real time plus `offset_s` from now on
        (within 0.1 s); written to a new file and renamed, so no reader sees half."""
        partial = self.offset_file.with_suffix(".partial")
        partial.write_text(f"{offset_s:.3f}\n")
        partial.replace(self.offset_file)
