"""A small filesystem of its own for one broker's data dir, for the fault run's disk
faults: an ext4 image file loop-mounted with `errors=remount-ro` (root).

    with SmallDisk(work_dir / "disk.img", work_dir / "disk", size_mb=400) as disk:
        ... broker data dir under disk.mount_point ...
        disk.fill()          # writes fail with ENOSPC until disk.free()
        disk.fail()          # an ext4 error: the filesystem turns read-only (EROFS)
        disk.repair()        # (nothing may hold files open) unmount, e2fsck, mount

`fail` goes through ext4's own error path (/sys/fs/ext4/DEV/trigger_fs_error), as
a disk error would: the journal aborts and the kernel remounts the filesystem
read-only, so every later write or fsync fails. Only unmounting clears that,
which is why `repair` needs the broker stopped first. Everything is unmounted and
the image removed on exit.
"""

from __future__ import annotations

import ctypes
import errno
import os
import subprocess
import time
from pathlib import Path
from types import TracebackType

COMMAND_TIMEOUT_S = 60
FILL_FILE_NAME = "fault-run-fill"
FILL_CHUNK_BYTES = 4 << 20


CLONE_NEWNS = 0x00020000


def enter_private_mount_namespace() -> None:
    """Give this process (and what it starts) a mount namespace of its own, a slave of
    the host's: the disk is mounted only there. Otherwise any other process that
    copies the mounts meanwhile (`ip netns exec` does, for every program it runs)
    keeps the filesystem alive after it is unmounted here, and it cannot be checked
    and mounted afresh. Call it before any thread starts."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWNS) != 0:
        raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWNS) failed")
    _run("mount", "--make-rslave", "/")


def _run(*args: str, check: bool = True) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(list(args), capture_output=True, timeout=COMMAND_TIMEOUT_S, check=check)


class SmallDisk:
    def __init__(self, image: Path, mount_point: Path, size_mb: int = 400) -> None:
        if os.geteuid() != 0:
            raise RuntimeError("disk faults need root (loop devices, mount)")
        self.image = image
        self.mount_point = mount_point
        self.size_mb = size_mb
        self._mounted = False

    def __enter__(self) -> SmallDisk:
        self.image.parent.mkdir(parents=True, exist_ok=True)
        with open(self.image, "wb") as image:
            image.truncate(self.size_mb << 20)
        _run("mkfs.ext4", "-q", "-F", "-m", "0", str(self.image))
        self.mount_point.mkdir(parents=True, exist_ok=True)
        self._mount()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _mount(self) -> None:
        _run("mount", "-o", "loop,errors=remount-ro", str(self.image), str(self.mount_point))
        self._mounted = True

    @property
    def device(self) -> str:
        """The loop device (`loop3`) the image is mounted from."""
        source = _run("findmnt", "-no", "SOURCE", str(self.mount_point)).stdout.decode()
        return Path(source.strip()).name

    def is_read_only(self) -> bool:
        options = _run("findmnt", "-no", "OPTIONS", str(self.mount_point)).stdout.decode()
        flags = options.strip().split(",")
        return "ro" in flags or "emergency_ro" in flags  # the latter: an ext4 error

    def fill(self) -> int:
        """Take every free block with one file; returns its size in bytes."""
        path = self.mount_point / FILL_FILE_NAME
        with open(path, "ab") as fill_file:
            stats = os.statvfs(self.mount_point)
            free_bytes = stats.f_bfree * stats.f_frsize
            try:
                os.posix_fallocate(fill_file.fileno(), fill_file.tell(), max(free_bytes, 1))
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
            # What fallocate left (metadata blocks, reserved rounding): plain writes.
            chunk = bytes(FILL_CHUNK_BYTES)
            while True:
                try:
                    fill_file.write(chunk)
                    fill_file.flush()
                except OSError as exc:
                    if exc.errno != errno.ENOSPC:
                        raise
                    if len(chunk) == 4096:
                        break
                    chunk = bytes(4096)
        return path.stat().st_size

    def free(self) -> None:
        """Remove what `fill` took."""
        (self.mount_point / FILL_FILE_NAME).unlink(missing_ok=True)

    def fail(self) -> None:
        """An ext4 error on the filesystem: it turns read-only at once."""
        Path(f"/sys/fs/ext4/{self.device}/trigger_fs_error").write_text("fault run\n")

    def repair(self) -> str:
        """Unmount (nothing may hold a file open there), check and mount again, read-write.
        Returns e2fsck's last line."""
        _run("umount", str(self.mount_point))
        self._mounted = False
        attached = self._loop_devices()
        for _ in range(20):  # the loop device is released just after the unmount
            if not attached:
                break
            time.sleep(0.1)
            attached = self._loop_devices()
        if attached:  # still mounted somewhere (another mount namespace): never fsck that
            raise RuntimeError(f"{self.image} is still in use after unmounting: {attached}")
        checked = _run("e2fsck", "-fy", str(self.image), check=False)
        if checked.returncode >= 4:  # 1 and 2: errors corrected
            raise RuntimeError(f"e2fsck could not repair {self.image}: {checked.stdout!r}")
        self._mount()
        self.free()
        lines = checked.stdout.decode(errors="replace").strip().splitlines()
        return lines[-1] if lines else ""

    def _loop_devices(self) -> str:
        return _run("losetup", "-j", str(self.image)).stdout.decode().strip()

    def close(self) -> None:
        if self._mounted:
            _run("umount", str(self.mount_point), check=False)
            if _run("findmnt", str(self.mount_point), check=False).returncode == 0:
                _run("umount", "-l", str(self.mount_point), check=False)
            self._mounted = False
        self.image.unlink(missing_ok=True)
