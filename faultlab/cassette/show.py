"""`faultlab cassette show`: a cassette as a readable conversation.

One line a message (its time, who sent it, its number or what it followed, its kind, its size),
a run of one side's audio chunks as one line (how many, how many seconds), each connection's
opening and end.
"""

from __future__ import annotations

from dataclasses import dataclass

from faultlab.cassette.format import Cassette, Recorded, Said
from faultlab.protocols import PROTOCOLS, Protocol


@dataclass
class _Run:
    """Consecutive messages of one side and one kind that carry audio, shown as one line."""

    first: Said
    last: Said
    count: int
    size: int
    audio_s: float


def _size(payload: str | bytes) -> int:
    return len(payload.encode() if isinstance(payload, str) else payload)


def _line(at: float, who: str, number: str, kind: str, detail: str) -> str:
    return f"  {at:9.3f}  {who:<6} {number:>9}  {kind:<40} {detail}".rstrip()


def _said_lines(rec: Recorded, protocol: Protocol) -> list[str]:
    lines: list[str] = []
    run: _Run | None = None

    def flush() -> None:
        nonlocal run
        if run is None:
            return
        first, last = run.first, run.last
        if first.sender == "client":
            number = f"#{first.n}" if run.count == 1 else f"#{first.n}-{last.n}"
        elif first.after == last.after:
            number = f"after #{first.after}"
        else:
            number = f"after #{first.after}-{last.after}"
        lines.append(_line(first.at, first.sender, number, first.kind,
                           f"{run.count} x, {run.audio_s:.2f} s of audio, {run.size} B"
                           f", until {last.at:.3f}" if run.count > 1 else
                           f"{run.size} B, {run.audio_s:.2f} s of audio"))
        run = None

    for said in rec.said:
        audio_s = float(protocol.describe(said.payload).get("audio_s") or 0.0)
        if audio_s:
            if run is not None and run.first.sender == said.sender and run.first.kind == said.kind:
                run.last, run.count = said, run.count + 1
                run.size += _size(said.payload)
                run.audio_s += audio_s
                continue
            flush()
            run = _Run(said, said, 1, _size(said.payload), audio_s)
            continue
        flush()
        number = f"#{said.n}" if said.sender == "client" else f"after #{said.after}"
        detail = f"{_size(said.payload)} B"
        if isinstance(said.payload, bytes):
            detail += ", binary frame"
        lines.append(_line(said.at, said.sender, number, said.kind, detail))
    flush()
    return lines


def render(cassette: Cassette, name: str) -> str:
    """The cassette as text."""
    protocol = PROTOCOLS[cassette.protocol]
    about = [f"{cassette.protocol}", f"from the {cassette.source or 'unknown'}'s tape"]
    if cassette.personality:
        about.append(f"personality {cassette.personality}")
    if cassette.recorded:
        about.append(f"recorded {cassette.recorded}")
    out = [f"cassette {name}: {', '.join(about)}; {len(cassette.connections)} connection(s)"]
    for rec in cassette.connections:
        sent = {side: sum(1 for s in rec.said if s.sender == side) for side in ("client", "server")}
        out.append("")
        out.append(f"connection {rec.conn} at {rec.at:.3f} s: {rec.path}"
                   + (f" (subprotocol {rec.subprotocol})" if rec.subprotocol else "")
                   + f"; {sent['client']} client and {sent['server']} server messages")
        out.extend(_said_lines(rec, protocol))
        e = rec.ending
        if e is None:
            out.append(_line(rec.said[-1].at if rec.said else rec.at, "", "", "(recording ends)",
                             ""))
        elif e.by is None:
            out.append(_line(e.at, "", f"after #{e.after}", "ends without a close frame", ""))
        else:
            reason = f" {e.reason!r}" if e.reason else ""
            out.append(_line(e.at, e.by, f"after #{e.after}", f"close {e.code}{reason}", ""))
    return "\n".join(out)
