"""Start a lab process: enter a network namespace, see the lab's /etc files, then exec.

Run as a script (`python -I -S enter.py`), not as `-m faultlab...`, so that starting a client or a
capture costs a bare interpreter start and no import of faultlab or its dependencies.

    enter.py RUNNER_PID NETNS_PATH ETC_DIR|- -- ARGV...

Each file of ETC_DIR (`hosts`, `resolv.conf`) is bound over /etc's, in a mount namespace of the
process's own. A lab process forked warm (faultlab.lab.zygote) enters its place by `enter()`.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

PR_SET_PDEATHSIG = 1
MS_REC = 0x4000
MS_PRIVATE = 1 << 18
MS_BIND = 0x1000


def main(argv: list[str]) -> None:
    if len(argv) < 5 or argv[3] != "--":
        sys.exit("usage: enter.py RUNNER_PID NETNS_PATH ETC_DIR|- -- ARGV...")
    enter(int(argv[0]), argv[1], argv[2])
    command = argv[4:]
    try:
        os.execvp(command[0], command)
    except OSError as exc:
        sys.exit(f"cannot run {command[0]!r}: {exc.strerror}")


def die_with(parent: int) -> ctypes.CDLL:
    """Be killed when `parent` (this process's parent) dies; libc, for what follows."""
    # The interpreter's own symbols, libc's among them: ctypes.util.find_library("c") runs
    # `ldconfig -p`, 30 ms of CPU at each lab process's start (measured: 45 ms against 16 ms).
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # it died before the line above took effect
        sys.exit("enter.py: the runner is gone")
    return libc


def enter(runner: int, netns_path: str, etc: str) -> None:
    """Die with `runner` (this process's parent; if it dies without tearing down, its lab
    processes die with it), enter the namespace at `netns_path`, and see the files of the folder
    `etc` over /etc's ("-": none); exits with a message on failure."""
    libc = die_with(runner)
    fd = os.open(netns_path, os.O_RDONLY)
    os.setns(fd, os.CLONE_NEWNET)
    os.close(fd)
    if etc != "-":
        os.unshare(os.CLONE_NEWNS)
        if libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None) != 0:
            _fail(libc, "make mounts private")
        for name in sorted(os.listdir(etc)):
            if libc.mount(os.path.join(etc, name).encode(), f"/etc/{name}".encode(), None,
                          MS_BIND, None) != 0:
                _fail(libc, f"bind the lab's {name} over /etc/{name}")


def _fail(libc: ctypes.CDLL, what: str) -> None:
    err = ctypes.get_errno()
    sys.exit(f"enter.py: cannot {what}: {os.strerror(err)}")


if __name__ == "__main__":
    main(sys.argv[1:])
