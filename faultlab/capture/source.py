"""What `faultlab pcap` reads: a pcap file or a run folder's capture, with the TLS key logs that
decrypt it, read in one pass (the flow walk, and tshark beside it when there are key logs).

A run folder holds `capture.pcap` (the router's link toward the client), perhaps `server.pcap`
(its link toward the server, or the uplink in a remote run) and key logs in NSS format:
`keys.log` (mitmproxy's, both legs), `emulator-keys.log` and `client-keys.log`.
"""

from __future__ import annotations

import itertools
import json
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from faultlab.capture.flows import PcapReport, analyse
from faultlab.capture.tshark import (
    TSHARK_HINT,
    dissect,
    find_tshark,
    merge_keylogs,
)
from faultlab.vocabulary.run import LabReady

CLIENT_CAPTURE = "capture.pcap"
SERVER_CAPTURE = "server.pcap"
RUN_KEYLOGS = ("keys.log", "emulator-keys.log", "client-keys.log")
PROXY_KEYLOG = "keys.log"


class CaptureInputError(ValueError):
    """A path or key log given to `faultlab pcap` cannot be used."""


@dataclass(frozen=True)
class CaptureSource:
    """The pcap to read, the key logs for its TLS, and notes on the choice."""

    pcap: Path
    keylogs: list[Path]
    notes: list[str] = field(default_factory=list)


def locate(path: Path, keylogs: Sequence[Path] = (), server_side: bool = False) -> CaptureSource:
    """The capture that PATH names, a file or a run folder, with the run's key logs that lie
    beside it and those given; a run folder's `server.pcap` is preferred when `server_side`, its
    `capture.pcap` otherwise."""
    for keylog in keylogs:
        if not keylog.is_file():
            raise CaptureInputError(f"{keylog}: no such key log file")
    if path.is_file():
        return CaptureSource(path, _with_run_keylogs(path.parent, keylogs))
    if not path.is_dir():
        raise CaptureInputError(f"{path}: no such capture file or run folder")
    order = (SERVER_CAPTURE, CLIENT_CAPTURE) if server_side else (CLIENT_CAPTURE, SERVER_CAPTURE)
    pcap = next((path / name for name in order if (path / name).is_file()), None)
    if pcap is None:
        raise CaptureInputError(f"{path}: no {CLIENT_CAPTURE} or {SERVER_CAPTURE} in this folder "
                                "(a run folder's capture is off when the profile says so)")
    notes = []
    if server_side and pcap.name == CLIENT_CAPTURE and (path / PROXY_KEYLOG).is_file():
        notes.append(f"no {SERVER_CAPTURE}: read {CLIENT_CAPTURE}, the client's leg, where the "
                     "proxy stands in for the server")
    if pcap.name == SERVER_CAPTURE and _through_uplink(path):
        notes.append(f"{SERVER_CAPTURE} was taken on the uplink to a remote service: its "
                     "WebSocket frames are the service's, but the TCP there (retransmissions, "
                     "keepalives, resets, giving up) is the uplink's own stack (slirp4netns), "
                     "not the service's")
    return CaptureSource(pcap, _with_run_keylogs(path, keylogs), notes)


def _with_run_keylogs(folder: Path, given: Sequence[Path]) -> list[Path]:
    """The key logs a run writes (RUN_KEYLOGS) that are in `folder`, then those `given` that
    are not among them."""
    found = [folder / name for name in RUN_KEYLOGS if (folder / name).is_file()]
    seen = {keylog.resolve() for keylog in found}
    return [*found, *(keylog for keylog in given if keylog.resolve() not in seen)]


def _through_uplink(run_dir: Path) -> bool:
    """Whether the run reached its target through an uplink (its `lab.ready` event says so)."""
    try:
        with (run_dir / "events.jsonl").open() as events:
            for line in itertools.islice(events, 20):
                event = json.loads(line)
                if event.get("event") == LabReady.NAME:
                    return bool(event.get("uplink"))
    except (OSError, ValueError):
        pass
    return False


def read_capture(source: CaptureSource, tshark: str | None = None,
                 payloads: bool = False) -> PcapReport:
    """Every flow of the capture, with WebSocket frames inside TLS when key logs are given and
    tshark is there (found on PATH unless given); the report's notes say what could not be read.
    With `payloads`, frames carry their messages and flows their handshakes (`flows.analyse`)."""
    tshark = tshark or find_tshark()
    if not source.keylogs or tshark is None:
        report = analyse(source.pcap, payloads=payloads)
    else:
        # mkdtemp's folder is its owner's alone (0700); it goes with the merged keys in it.
        with tempfile.TemporaryDirectory(prefix="faultlab-tshark-") as folder:
            work = Path(folder)
            keylog = merge_keylogs(source.keylogs, work / "keys.log")
            with dissect(source.pcap, keylog, tshark, work, payloads) as rows:
                report = analyse(source.pcap, rows, payloads=payloads)
        report.keylogs = list(source.keylogs)
    report.notes = [*source.notes, *tls_notes(report, bool(source.keylogs), tshark is not None)]
    return report


def tls_notes(report: PcapReport, keylogs: bool, tshark: bool) -> list[str]:
    """What keeps frames inside TLS from being read (no key log, no tshark, no key for some
    flows): none when every TLS flow was decrypted, or there is no TLS."""
    tls = [f for f in report.flows if f.tls]
    if not tls:
        return []
    if not keylogs:
        return [f"{len(tls)} TLS flow(s): to list their WebSocket frames give the key log "
                "(--keylog FILE) or the run folder" + ("" if tshark else f", and {TSHARK_HINT}")]
    if not tshark:
        return [f"{len(tls)} TLS flow(s): their WebSocket frames need tshark, which is not on "
                f"PATH: {TSHARK_HINT}"]
    dark = [f for f in tls if not f.decrypted]
    if len(dark) == len(tls):
        return [f"the key log(s) decrypted none of the {len(tls)} TLS flow(s): they hold no "
                "secrets of these connections"]
    if dark:
        return [f"{len(dark)} of {len(tls)} TLS flow(s) not decrypted: the key logs hold no "
                "secrets of them (or their handshake is not in the capture)"]
    return []
