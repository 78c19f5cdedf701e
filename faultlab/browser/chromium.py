"""Starting Debian's headless Chromium driven over a pipe, and ending it with all its helpers.

The browser is driven over `--remote-debugging-pipe` (JSON messages ended by NUL, read from its
fd 3 and written to its fd 4), never a port. It is the first process of a PID namespace of its
own (`unshare --pid --kill-child`), so that when it ends, or the unshare above it is killed,
the kernel ends its zygote, renderers and utility processes too: one PID ends them all, and a
SIGKILLed run's browser goes with the namespace's other processes (`faultlab lab gc`). Its
profile (`--user-data-dir`) and `HOME` are a folder of its own: its certificate store
(`HOME/.pki/nssdb`, which Chromium on Linux reads) trusts only what the caller adds there.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding

# Debian's package; `make install` (as root) installs it, and libnss3-tools for certutil.
CHROMIUM = "chromium"
CERTUTIL = "certutil"
FLAGS = ("--headless=new", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe",
         "--disable-background-networking", "--disable-component-update", "--no-first-run",
         "--disable-default-apps", "--disable-sync", "--hide-scrollbars", "--mute-audio",
         "--disable-breakpad", "--no-default-browser-check", "--password-store=basic")
# Seconds from a SIGTERM (or Browser.close) to the browser's exit before a SIGKILL.
CLOSE_TIMEOUT_S = 5.0


def unavailable(needs_root: bool = True) -> str | None:
    """Why a browser cannot run here; None when it can."""
    if needs_root and os.geteuid() != 0:
        return "needs root: the browser runs in namespaces of its own (unshare --pid)"
    if shutil.which(CHROMIUM) is None:
        return "no chromium: `make install` as root installs Debian's chromium package"
    if shutil.which("unshare") is None:
        return "no unshare (util-linux)"
    return None


def _high_fd(fd: int) -> int:
    """`fd` moved above the numbers the browser's pipe takes (3 and 4): a dup2 onto itself would
    keep its close-on-exec flag."""
    moved = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
    os.close(fd)
    return moved


@dataclass
class Spawned:
    """A started browser: the PID of the unshare that leads its PID namespace, and the pipe's
    ends on this side (commands go to `to_fd`, answers and events come from `from_fd`)."""

    pid: int
    to_fd: int
    from_fd: int


def trust(home: Path, ca_files: Iterable[Path]) -> int:
    """An NSS store in `home/.pki/nssdb` trusting each certificate in the PEM files as a CA for
    web sites; how many it holds. The browser's own store: nothing system-wide changes."""
    certutil = shutil.which(CERTUTIL)
    if certutil is None:
        raise OSError("no certutil: `make install` as root installs Debian's libnss3-tools")
    db = home / ".pki" / "nssdb"
    db.mkdir(parents=True, exist_ok=True, mode=0o700)
    subprocess.run([certutil, "-N", "-d", f"sql:{db}", "--empty-password"], check=True,
                   capture_output=True, timeout=30)
    added = 0
    for path in ca_files:
        for cert in x509.load_pem_x509_certificates(path.read_bytes()):
            added += 1
            subprocess.run([certutil, "-A", "-d", f"sql:{db}", "-n", f"faultlab-{added}",
                            "-t", "C,,"], input=cert.public_bytes(Encoding.PEM), check=True,
                           capture_output=True, timeout=30)
    return added


def spawn(profile: Path, flags: Sequence[str], log: Path, env: Mapping[str, str],
          own_network: bool = False) -> Spawned:
    """Start the browser with its profile (and HOME) in `profile`, `flags` after faultlab's, its
    output to `log`; `own_network` puts it in a network namespace of its own too (it reaches
    nothing: a page that must not touch a network)."""
    chromium = shutil.which(CHROMIUM)
    if chromium is None:
        raise OSError(unavailable(needs_root=False) or "no chromium")
    to_r, to_w = (_high_fd(fd) for fd in os.pipe())
    from_r, from_w = (_high_fd(fd) for fd in os.pipe())
    argv = ["unshare", *(["--net"] if own_network else []), "--pid", "--kill-child", chromium,
            *FLAGS, f"--user-data-dir={profile}", *flags]
    try:
        pid = os.posix_spawnp("unshare", argv, {**env, "HOME": str(profile)}, file_actions=[
            (os.POSIX_SPAWN_OPEN, 0, "/dev/null", os.O_RDONLY, 0),
            (os.POSIX_SPAWN_OPEN, 1, str(log), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600),
            (os.POSIX_SPAWN_DUP2, 1, 2),
            (os.POSIX_SPAWN_DUP2, to_r, 3),
            (os.POSIX_SPAWN_DUP2, from_w, 4),
        ])
    except BaseException:
        os.close(to_w)
        os.close(from_r)
        raise
    finally:
        os.close(to_r)
        os.close(from_w)
    return Spawned(pid, to_w, from_r)


def end(pid: int, grace_s: float = CLOSE_TIMEOUT_S) -> int:
    """Wait up to `grace_s` for the browser (asked to close) to exit, then SIGKILL the unshare
    that leads its PID namespace (its helpers go with it); its wait status."""
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            return status
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    return os.waitpid(pid, 0)[1]
