"""Root, or a user namespace: what the lab needs, and the re-exec that gets it without root."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from faultlab import interrupt
from faultlab.errors import PrivilegeError

# Set in the environment of a faultlab re-executed inside its own user namespace.
USERNS_MARK = "FAULTLAB_USERNS"
# The user keeps its own uid and gets every capability in the new namespaces as ambient
# capabilities, so that they survive exec into iptables and tcpdump. Mapping it to uid 0 instead
# (`--map-root-user`) breaks tcpdump: as uid 0 it insists on dropping to another user, and
# setgroups is denied in an unprivileged user namespace. faultlab itself stays in the host's
# network namespace, where it has no capability (the lab's namespaces are new ones of its own):
# the uplink to a remote target (slirp4netns) must open its sockets there.
UNSHARE_ARGS = ("--user", "--map-current-user", "--keep-caps", "--mount")


def in_user_namespace() -> bool:
    """True inside a user namespace other than the host's (uid 0 there is not root on the host)."""
    try:
        first = Path("/proc/self/uid_map").read_text().split("\n", 1)[0].split()
    except OSError:
        return False
    return first != ["0", "0", "4294967295"]


def userns_available() -> bool:
    """Whether this user can make a user + network + mount namespace (as `unshare -Urnm`): the
    re-exec's user and mount namespaces, and in them the lab's network namespaces."""
    unshare = shutil.which("unshare")
    if unshare is None:
        return False
    done = subprocess.run(
        [unshare, *UNSHARE_ARGS, "--net", "true"],
        capture_output=True, check=False,
    )
    return done.returncode == 0


def reexec_in_user_namespace(args: Sequence[str]) -> None:
    """Without root, run this faultlab command again inside a new user and mount namespace,
    where it has every capability over the network namespaces it makes; returns only when
    already privileged."""
    if os.geteuid() == 0 or (os.environ.get(USERNS_MARK) == "1" and in_user_namespace()):
        return
    unshare = shutil.which("unshare")
    if unshare is None or not userns_available():
        raise PrivilegeError(
            "building a lab needs root or unprivileged user namespaces "
            "(sysctl user.max_user_namespaces > 0, util-linux's unshare); see `faultlab doctor`"
        )
    os.environ[USERNS_MARK] = "1"
    # Held across the exec, a SIGINT or SIGTERM is delivered once the new command has caught
    # them (faultlab.interrupt) instead of killing it before its first instruction.
    interrupt.hold()
    os.execv(unshare, [unshare, *UNSHARE_ARGS, "--", sys.executable, "-m", "faultlab", *args])
