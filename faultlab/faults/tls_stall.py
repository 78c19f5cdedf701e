"""tls_stall: new TLS handshakes stall after the ClientHello; connections already open go on.

With the proxy in the path the client's handshake ends in the proxy, which answers it only once
its own handshake with the server is done (it mirrors the server's certificate): the same marks
on the proxy's new connections to the target (the server leg, faultlab.faults.legs) stall that
one, and with it the client's.
"""

from __future__ import annotations

from typing import Any, ClassVar

from faultlab.faults.base import Fault, FaultContext, FaultParams, Layer, register
from faultlab.faults.legs import LegChain, proxied
from faultlab.lab.netfilter import chain_name, install, uninstall

# The conntrack mark of a connection opened while a tls_stall is active (its bits: #25).
STALLED_MARK = "0x250000/0x250000"
# u32: at least 4 bytes past the IP and TCP headers (each header's length is read from the
# packet), i.e. a segment that carries data; a pure ACK, SYN-ACK, FIN or RST has none.
CARRIES_DATA = "0>>22&0x3C@12>>26&0x3C@0>>24=0:255"


class TlsStallParams(FaultParams):
    """No parameters: every connection the client opens from now on stalls."""


@register
class TlsStall(Fault[TlsStallParams]):
    """Mark each connection whose SYN the router forwards from now on and drop every data segment
    the server sends on it: the handshake completes and the ClientHello reaches the server (whose
    ACK comes back, so the client's TCP does not retransmit), but the ServerHello and each of its
    retransmissions vanish, so the client waits in its TLS handshake. Connections opened before
    are not marked (conntrack picks them up mid-stream without a SYN), so they are unharmed."""

    name: ClassVar[str] = "tls_stall"
    mechanism: ClassVar[str] = ("iptables CONNMARK on new connections' SYN at the router, the "
                                "server's data segments on them dropped")
    layer: ClassVar[Layer] = "packet"
    Params = TlsStallParams

    def __init__(self, step_id: str, params: TlsStallParams) -> None:
        super().__init__(step_id, params)
        self._legs = LegChain(step_id)

    async def apply(self, ctx: FaultContext) -> dict[str, Any]:
        link = ctx.lab.client_link
        rules = [f"-i {link} -p tcp --syn -m conntrack --ctstate NEW "
                 f"-j CONNMARK --set-xmark {STALLED_MARK}",
                 f"-o {link} -p tcp -m connmark --mark {STALLED_MARK} "
                 f'-m u32 --u32 "{CARRIES_DATA}" -j DROP']
        await install(ctx.lab.router, ["FORWARD"], chain_name(self.step_id), rules)
        if not proxied(ctx):
            return {}
        port = ctx.connections.port
        to_port = f" --dport {port}" if port else ""
        server = ctx.lab.target_link
        on_legs = [f"-o {server} -p tcp --syn{to_port} -m conntrack --ctstate NEW "
                   f"-j CONNMARK --set-xmark {STALLED_MARK}",
                   f"-i {server} -p tcp -m connmark --mark {STALLED_MARK} "
                   f'-m u32 --u32 "{CARRIES_DATA}" -j DROP']
        try:
            await self._legs.install_rules(ctx, on_legs, ["server"])
        except BaseException:
            await uninstall(ctx.lab.router, ["FORWARD"], chain_name(self.step_id))
            raise
        return {"legs": sorted(self._legs.legs)}

    async def revert(self, ctx: FaultContext) -> None:
        # The marks stay on the connections' conntrack entries, but no rule reads them: a stalled
        # handshake completes at the server's next retransmission (measured: 0.3-0.9 s after revert,
        # after a 3 s stall; the client's TCP saw its ClientHello acked and never retransmitted).
        await uninstall(ctx.lab.router, ["FORWARD"], chain_name(self.step_id))
        await self._legs.uninstall(ctx)
