"""tls_stall: the exact batch it commits at the router (mark new connections, drop the server's
data on them) and its revert."""

from __future__ import annotations

from faultlab.connections import ConnectionTable

from .conftest import (
    SERVER_PORT,
    FakeContext,
    FakeProxyChannel,
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


def test_with_the_proxy_the_proxys_new_connections_to_the_target_stall_too() -> None:
    """With the proxy: beside the FORWARD chain, a chain on the legs marks the proxy's new
    connections to the target's port (OUTPUT, by the target's link) and drops the server's data on
    them (INPUT): the proxy's own handshake stalls, and the client's waits on it. Revert removes
    both chains."""
    ctx = FakeContext(connections=ConnectionTable(SERVER_PORT), proxy=FakeProxyChannel())
    assert apply_and_revert(build("tls_stall", step="tls"), ctx) == {"legs": ["server"]}
    batches = ctx.lab.ns("router").batches
    assert batches[1] == [
        ":FLP-tls - [0:0]",
        "-A FLP-tls -o s0 -p tcp --syn --dport 443 -m conntrack --ctstate NEW "
        "-j CONNMARK --set-xmark 0x250000/0x250000",
        "-A FLP-tls -i s0 -p tcp -m connmark --mark 0x250000/0x250000 "
        '-m u32 --u32 "0>>22&0x3C@12>>26&0x3C@0>>24=0:255" -j DROP',
        "-I INPUT 1 -j FLP-tls", "-I OUTPUT 1 -j FLP-tls"]
    assert batches[2:] == [
        ["-D FORWARD -j FL-tls", "-F FL-tls", "-X FL-tls"],
        ["-D INPUT -j FLP-tls", "-D OUTPUT -j FLP-tls", "-F FLP-tls", "-X FLP-tls"]]
