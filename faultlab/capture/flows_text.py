"""How `faultlab pcap inspect` prints a capture's walk (`faultlab.capture.flows`) as text: a
table of each flow's directions, then its WebSocket frames."""

from __future__ import annotations

from typing import Any

from faultlab.capture.flows import PcapReport


def tls_state(flow: dict[str, Any]) -> str:
    """How a flow's TLS reads, for the text reports: "" (no TLS), decrypted or not."""
    if not flow["tls"]:
        return ""
    if flow["decrypted"] is None:
        return "  (TLS)"
    return "  (TLS, decrypted)" if flow["decrypted"] else "  (TLS, not decrypted: no key for it)"


def _frame_line(fr: dict[str, Any]) -> str:
    flags = f"{'fin' if fr['fin'] else '-':<4}{'masked' if fr['masked'] else '-':<7}"
    extra = ""
    if fr["opcode"] == "close":
        extra = f"  code={fr['close_code']} reason={fr['close_reason']!r}"
        if fr["peer_last_t"] is not None:
            extra += f"  ({fr['t'] - fr['peer_last_t']:.3f} s after the peer's last packet)"
    extra += f"  kind={fr['kind']}" if fr.get("kind") else ""
    return (f"    t={fr['t']:.6f}  {fr['direction']:<15} {fr['opcode']:<12} {flags}"
            f"len={fr['length']}{extra}")


def render_text(report: PcapReport) -> str:
    data = report.to_dict()
    lines = [f"{data['file']}: {data['packets']} TCP packets over {data['duration_s']:.3f} s, "
             f"{len(data['flows'])} flow(s)"]
    if data["keylogs"]:
        lines.append("key logs: " + ", ".join(data["keylogs"]))
    lines += data["notes"]
    for i, flow in enumerate(data["flows"], 1):
        lines += ["", f"flow {i}: {flow['client']} -> {flow['server']}{tls_state(flow)}",
                  f"  {'direction':<16}{'packets':>8}{'bytes':>10}{'FIN':>5}{'RST':>5}"
                  f"{'retrans':>9}{'keepalive':>10}  longest silence"]
        for name in ("client_to_server", "server_to_client"):
            d = flow[name]
            since = d["longest_silence_from_t"]
            silence = (f"{d['longest_silence_s']:.3f} s from t={since:.3f}" if since is not None
                       else "-")
            lines.append(f"  {name.replace('_to_', '->'):<16}{d['packets']:>8}"
                         f"{d['payload_bytes']:>10}{d['fin']:>5}{d['rst']:>5}"
                         f"{d['retransmissions']:>9}{d['keepalives']:>10}  {silence}")
        frames = flow["websocket_frames"]
        if frames:
            lines.append(f"  WebSocket frames: {len(frames)}")
            lines += [_frame_line(fr) for fr in frames]
        for name in ("client_to_server", "server_to_client"):
            if stop := flow[name]["websocket_abandoned"]:
                lines.append(
                    f"  {name.replace('_to_', '->')}: WebSocket decoding stopped at t={stop['t']:.6f}:"
                    f" {stop['pending_bytes']} bytes in {stop['pending_segments']} segments waited"
                    f" behind a hole in the stream (limit {stop['max_pending_bytes'] >> 20} MiB or"
                    f" {stop['max_pending_segments']} segments per direction); later frames are not"
                    " listed")
    return "\n".join(lines)
