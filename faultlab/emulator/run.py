"""Starting the emulator as a service: the CA, the registry, the events, the server."""

from __future__ import annotations

import asyncio
import ctypes
import ipaddress
import signal
from collections.abc import Callable, Sequence
from pathlib import Path

from faultlab.cassette.format import Cassette, Divergence
from faultlab.cassette.replay import Replay
from faultlab.cassette.tape import TapeWriter
from faultlab.emulator.audio import TranscriptRegistry
from faultlab.emulator.personality import personality_from
from faultlab.emulator.server import EmulatorServer, Host
from faultlab.emulator.session import Emulator
from faultlab.errors import EmulatorError
from faultlab.events import EventWriter
from faultlab.scenarios import brain_of
from faultlab.tls import LOOPBACK_IPS, SERVICE_NAMES, LabCA, client_environment


def base_url(host: str, port: int) -> str:
    shown = "localhost" if host in ("0.0.0.0", "::", "127.0.0.1", "localhost") else host
    if ":" in shown:
        shown = f"[{shown}]"
    return f"https://{shown}:{port}"


# glibc's malloc serves a block this big or bigger with its own mmap, returned to the system when
# freed. By default the threshold slides up to the largest block freed (up to 32 MiB), and the
# next ones stay on the heap: after 3,000 connections with forty 10 MB turns, all freed, the
# emulator stayed 29 MB above its start with the sliding threshold, 12 MB with this one.
MMAP_THRESHOLD_BYTES = 128 * 1024
M_MMAP_THRESHOLD = -3  # mallopt's parameter number (malloc.h)


def give_back_freed_blocks() -> None:
    """Have malloc return every big block it frees (glibc; elsewhere, nothing happens)."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return
    mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)


async def serve_until_stopped(
    host: str, port: int, personality: str, time_scale: float, ca_dir: Path | None,
    utterances: Sequence[Path], events_path: Path | None, seed: int | None,
    announce: Callable[[dict[str, str], int], None], overrides: dict[str, object] | None = None,
    tape: Path | None = None, cassette: Cassette | None = None,
    divergence: Divergence = "strict",
) -> None:
    """Serve until SIGTERM or SIGINT; `personality` is a built-in's name or a personality file
    (whose problems raise ProfileError), with `overrides` on top. With `cassette`, serve its
    recorded server side instead (the personality takes over where a client diverges, under
    `fallback`); with `tape`, write there what every connection carried."""
    try:
        behaviour = personality_from(personality, overrides)
        brain = brain_of(behaviour.scenario)
    except ValueError as exc:
        raise EmulatorError(str(exc)) from None
    if time_scale <= 0:
        raise EmulatorError("the time scale must be > 0")
    ca = LabCA(ca_dir)
    ips = list(LOOPBACK_IPS)
    try:
        ipaddress.ip_address(host)
        if host not in ("0.0.0.0", "::"):
            ips.append(host)
    except ValueError:
        pass
    names = [*SERVICE_NAMES, *([] if host in ips or host in ("0.0.0.0", "::") else [host])]
    registry = TranscriptRegistry()
    for folder in utterances:
        if not folder.is_dir():
            raise EmulatorError(f"{folder}: not a folder of NAME.wav + NAME.txt utterances")
        registry.load_dir(folder)
    writer = EventWriter(events_path)
    give_back_freed_blocks()

    if cassette is not None and cassette.protocol != behaviour.protocol:
        raise EmulatorError(f"the cassette speaks {cassette.protocol}, the personality "
                            f"{behaviour.name} {behaviour.protocol}")
    emulator = Emulator(behaviour, time_scale, brain=brain,
                        registry=registry, emit=writer.emit, seed=seed)
    emulator.api.prepare()
    host_of: Host = emulator if cassette is None else Replay(cassette, emulator, divergence)
    recorder = TapeWriter(tape) if tape is not None else None
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        asyncio.get_running_loop().add_signal_handler(sig, stop.set)
    try:
        async with EmulatorServer(host_of, ca.server_context(names, ips), host, port,
                                  recorder) as server:
            announce(client_environment(str(ca.cert_path), base_url(host, server.port),
                                        emulator.api.protocol.service), server.port)
            await stop.wait()
    except OSError as exc:
        raise EmulatorError(f"cannot serve on {host}:{port}: {exc.strerror or exc}") from None
    finally:
        writer.close()
        if recorder is not None:
            recorder.close()
