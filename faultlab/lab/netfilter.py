"""The lab's netfilter layer, the one way anything changes iptables: atomic batches.

`iptables-restore --noflush` commits a batch in one netlink transaction (measured 1.5-4 ms to add
a chain and its jump; 14-30 ms to remove one, which nobody waits for). A fault's rules are a chain
of its own (`install`, `uninstall`), jumped to from the head of the hook chain, ahead of any
stateful ACCEPT; the lab adds its NAT (`redirect` to the proxy, `masquerade` behind an uplink);
`commit` runs any other batch (the impairment engine's probe).
"""

from __future__ import annotations

import functools
import shutil
import subprocess
from collections.abc import Sequence

from faultlab.errors import MechanismError
from faultlab.lab.namespace import Namespace

SEARCH_PATH = "/usr/sbin:/sbin:/usr/bin:/bin"


@functools.cache
def _restore_binary() -> str:
    found = shutil.which("iptables-restore", path=SEARCH_PATH)
    if found is None:
        raise MechanismError("iptables-restore is missing: apt-get install iptables")
    return found


def chain_name(step_id: str) -> str:
    """The chain of a step's fault: `FL-<step id>` (iptables allows 28 characters)."""
    return f"FL-{step_id}"[:28]


def commit(batch: Sequence[str], table: str = "filter") -> None:
    """Commit `batch` (iptables-restore lines, without the table and COMMIT) to `table` of the
    calling thread's namespace, all or nothing."""
    text = "\n".join([f"*{table}", *batch, "COMMIT", ""])
    done = subprocess.run(
        [_restore_binary(), "--noflush"], input=text.encode(), capture_output=True, check=False
    )
    if done.returncode != 0:
        raise MechanismError(
            f"iptables-restore failed: {done.stderr.decode(errors='replace').strip()}"
        )


async def install(ns: Namespace, hooks: Sequence[str], chain: str, rules: Sequence[str],
                  table: str = "filter") -> None:
    """Create `chain` holding `rules` and jump to it first thing from every hook chain (of
    `table`)."""
    batch = [f":{chain} - [0:0]", *(f"-A {chain} {rule}" for rule in rules)]
    batch += [f"-I {hook} 1 -j {chain}" for hook in hooks]
    await ns.run(commit, batch, table)


async def uninstall(ns: Namespace, hooks: Sequence[str], chain: str,
                    table: str = "filter") -> None:
    """Remove the jumps to `chain` and the chain itself (of `table`)."""
    batch = [f"-D {hook} -j {chain}" for hook in hooks] + [f"-F {chain}", f"-X {chain}"]
    await ns.run(commit, batch, table)


async def redirect(ns: Namespace, iface: str, port: int, to_port: int) -> None:
    """Send TCP connections arriving on `iface` for `port` to a local `to_port` (the proxy).

    The nat rule switches connection tracking on in the namespace; it must be in place before the
    client connects (a REDIRECT added mid-flow does not capture an existing connection, and can
    reset it when tracking was off).
    """
    await ns.run(commit, [f"-A PREROUTING -i {iface} -p tcp --dport {port} "
                            f"-j REDIRECT --to-ports {to_port}"], "nat")


def masquerade(iface: str) -> None:
    """In the calling thread's namespace (the router's, being built): what leaves by `iface`
    leaves behind that interface's own address. Added before any connection, like `redirect`."""
    commit([f"-A POSTROUTING -o {iface} -j MASQUERADE"], "nat")
