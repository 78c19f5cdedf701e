"""pcap decoding and inspection of a generated 100k-packet ws:// Live API capture, beside dpkt and
scapy parsing the same file into the same flow walk (goals 2x and 5x, and >= 50k packets/s), and
`faultlab pcap inspect` beside tshark listing the same WebSocket frames.

Runs anywhere (no lab). `make bench`'s part `pcap`, with the 15-minute wss:// session of
pcap_bench.py (alone: `python bench/all.py --only pcap`).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from pcap_peers import (
    PEERS,
    decode_rate,
    dpkt_segments,
    faultlab_command,
    inspect_beside,
    missing,
    tshark_frames,
)
from table import Measure, Row, print_beside, print_figure, skipped, versus

from faultlab.capture.pcap import (
    ACK,
    PSH,
    SYN,
    build_tcp_packet,
    numbered_segments,
    write_header,
    write_record,
)
from faultlab.capture.tshark import find_tshark

# Live API messages, as a voice session sends them (small, so each frame is one packet): the
# client's audio chunk up, masked; the model's audio down. Every frame is JSON, so the inspector
# parses each one to name its kind, as on a real capture.
UP_MESSAGE = (b'{"realtimeInput":{"audio":{"data":"' + b"A" * 40
              + b'","mimeType":"audio/pcm;rate=16000"}}}')
DOWN_MESSAGE = (b'{"serverContent":{"modelTurn":{"parts":[{"inlineData":{"data":"' + b"B" * 16
                + b'","mimeType":"audio/pcm;rate=24000"}}]}}}')
MASK = b"\x01\x02\x03\x04"


def make_capture(path: Path, packets: int) -> None:
    """A ws:// Live API session of `packets` packets: JSON text frames both ways (the client's
    masked), each in its own segment."""
    c, s, cs, ss = "198.18.0.2", "198.18.0.6", 1000, 9000
    masked = bytes(b ^ MASK[i % 4] for i, b in enumerate(UP_MESSAGE))
    frame = bytes([0x81, 0x80 | len(UP_MESSAGE)]) + MASK + masked
    reply = bytes([0x81, len(DOWN_MESSAGE)]) + DOWN_MESSAGE
    with path.open("wb") as f:
        write_header(f)
        t = 1_700_000_000.0
        get = b"GET / HTTP/1.1\r\nUpgrade: websocket\r\n\r\n"
        ok = b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n"
        write_record(f, t, build_tcp_packet(c, 40000, s, 8765, cs - 1, 0, SYN))
        write_record(f, t, build_tcp_packet(s, 8765, c, 40000, ss - 1, cs, SYN | ACK))
        write_record(f, t, build_tcp_packet(c, 40000, s, 8765, cs, ss, PSH | ACK, get))
        write_record(f, t, build_tcp_packet(s, 8765, c, 40000, ss, cs + len(get), PSH | ACK, ok))
        cs, ss = cs + len(get), ss + len(ok)
        for i in range(packets - 4):
            t += 0.0005
            if i % 2 == 0:
                write_record(f, t, build_tcp_packet(c, 40000, s, 8765, cs, ss, PSH | ACK, frame))
                cs += len(frame)
            else:
                write_record(f, t, build_tcp_packet(s, 8765, c, 40000, ss, cs, PSH | ACK, reply))
                ss += len(reply)


WS_PORT = 8765  # the generated capture's server port


def collect(packets: int = 100_000) -> list[Row]:
    """Decoding and inspection of a generated ws:// capture, beside dpkt, scapy and tshark."""
    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.pcap"
        make_capture(path, packets)
        n, seconds = decode_rate(numbered_segments, path)
        decode = n / seconds
        peers = PEERS
        ours, walked = inspect_beside(path, {peer: numbered for peer, numbered, _, _ in peers
                                             if missing(peer) is None})
        assert ours.frames == packets - 4, f"decoded {ours.frames} WebSocket frames of {packets - 4}"
        print_figure(f"pcap decode ({n} packets), Ethernet/IP/TCP", decode, "pkt/s", ">= 50000",
                     decode >= 50000)
        print_figure(f"pcap inspect ({ours.packets} packets), flows + WS frames", ours.rate,
                     "pkt/s", ">= 50000", ours.rate >= 50000)
        decode_figure = f"pcap decode, ws:// capture ({n:,} packets)"
        inspect_figure = f"pcap inspect, ws:// capture ({ours.packets:,} packets)"
        if (why := missing("dpkt")) is not None:
            rows.append(skipped(decode_figure, "dpkt", why, goal=">= 50,000 pkt/s"))
        else:
            dn, dseconds = decode_rate(dpkt_segments, path)
            print_beside("dpkt, decode", dn / dseconds, "pkt/s")
            rows.append(versus(decode_figure, Measure(decode, "pkt/s"), "dpkt",
                               Measure(dn / dseconds, "pkt/s"), "higher", also=decode >= 50000,
                               goal=">= 50,000 pkt/s",
                               note="decode: every packet to a TCP segment (Ethernet/IPv4/TCP "
                                    "and its payload), nothing else: faultlab's hand decoder, "
                                    "dpkt's pcap.Reader + ethernet.Ethernet"))
        walk = ("each parses every packet to its TCP payload and feeds faultlab's flow walk "
                "(flows, per-direction counts, silences, retransmissions, reassembly, every "
                "WebSocket frame with its kind)")
        for peer, _, at_least, parse in peers:
            first = peer == "dpkt"
            if (why := missing(peer)) is not None:
                rows.append(skipped(inspect_figure, peer, why, goal=f">= {at_least:g}x"))
                continue
            theirs = walked[peer]
            print_beside(f"{peer}, inspect", theirs.rate, "pkt/s")
            same = theirs.frames == ours.frames and theirs.packets == ours.packets
            rows.append(versus(
                inspect_figure, Measure(ours.rate, "pkt/s"), peer, Measure(theirs.rate, "pkt/s"),
                "higher", at_least=at_least, also=same and (ours.rate >= 50000 if first else True),
                goal=">= 50,000 pkt/s" if first else "",
                note=(f"inspect in-process: faultlab's parser and {peer}'s ({parse}), "
                      f"faultlab and dpkt alternating (3 and 2 runs, means), scapy once, last; "
                      f"{walk}; "
                      f"frames {theirs.frames:,} of faultlab's {ours.frames:,}"
                      + ("" if same else " (DIFFERENT: not the same work)"))))
        command_figure = f"pcap inspect command, ws:// capture ({ours.packets:,} packets)"
        tshark = find_tshark()
        if tshark is None:
            rows.append(skipped(command_figure, "tshark", "tshark is not installed "
                                "(make install: apt-get install tshark)"))
            return rows
        cli_s, out = faultlab_command("pcap", "inspect", str(path))
        cli_frames = sum(len(f["websocket_frames"]) for f in out["flows"])
        ts = tshark_frames(tshark, path, http_port=WS_PORT)
        print(f"{'pcap inspect command (a process)':<44} {ours.packets / cli_s:>10.2f} pkt/s")
        print_beside("tshark, WebSocket frames listed", ts.packets / ts.seconds, "pkt/s")
        rows.append(versus(
            command_figure, Measure(ours.packets / cli_s, "pkt/s"), "tshark",
            Measure(ts.packets / ts.seconds, "pkt/s"), "higher",
            note=f"as a user runs them, each a process: `faultlab pcap inspect FILE --json` "
                 f"({cli_frames:,} frames with their kinds) and `tshark -r FILE -d "
                 f"tcp.port=={WS_PORT},http -T fields -e websocket.opcode -e "
                 f"websocket.payload_length -e websocket.payload.text`, TCP reassembly on "
                 f"({ts.frames:,} frames)"))
    return rows
