"""tls_stall: the exact batch it commits at the router (mark new connections, drop the server's
data on them) and its revert."""

from __future__ import annotations

from .conftest import (
    FakeContext,
    apply_and_revert,
    assert_a_packet_fault_the_run_holds,
    build,
    params_of,
    refusal,
)


def test_it_has_no_parameters() -> None:
    """tls_stall takes no parameters, and refuses any (a direction or a connection mean nothing
    for connections not yet opened)."""
    assert params_of("tls_stall").model_dump() == {}
    assert list(refusal("tls_stall", {"connection": 1})) == ["connection"]


def test_new_connections_are_marked_and_the_servers_data_on_them_dropped() -> None:
    """One chain jumped to from FORWARD: a SYN from the client link starting a new conntrack
    entry marks it; a segment with data leaving toward the client on a marked connection is
    dropped. Revert removes exactly that chain."""
    ctx = FakeContext()
    assert apply_and_revert(build("tls_stall", step="tls"), ctx) == {}
    assert ctx.lab.ns("router").batches == [
        [":FL-tls - [0:0]",
         "-A FL-tls -i c0 -p tcp --syn -m conntrack --ctstate NEW "
         "-j CONNMARK --set-xmark 0x250000/0x250000",
         "-A FL-tls -o c0 -p tcp -m connmark --mark 0x250000/0x250000 "
         '-m u32 --u32 "0>>22&0x3C@12>>26&0x3C@0>>24=0:255" -j DROP',
         "-I FORWARD 1 -j FL-tls"],
        ["-D FORWARD -j FL-tls", "-F FL-tls", "-X FL-tls"],
    ]


def test_tls_stall_is_a_packet_fault_the_run_holds() -> None:
    """The run starts nothing for it (no proxy), holds it, and a restore removes its chain."""
    _, lab = assert_a_packet_fault_the_run_holds("tls_stall")
    assert lab.ns("router").batches[-1] == ["-D FORWARD -j FL-s1", "-F FL-s1", "-X FL-s1"]
