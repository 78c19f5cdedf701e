"""A synthetic Live API session over wss://, captured with its TLS key logs in a network namespace
of its own: for the pcap benchmark and the capture tests (needs root).

`record(plan, folder)` fills `folder` as a run would: `capture.pcap` (tcpdump on the namespace's
loopback), `emulator-keys.log` (the server's TLS secrets) and `client-keys.log` (the client's).
The server and the client run in one process inside the namespace (this module's `main`) and
speak as fast as they can: a 15-minute session's 11,000 frames take about 1.5 s.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import ctypes
import json
import os
import random
import select
import signal
import ssl
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from faultlab.errors import LabError
from faultlab.private import create_private

PORT = 443
REAPING_CLOSE = (1011, "Internal error encountered.")
# Loopback with a real link's packet size: a 1,500-byte MTU, and no segmentation offload (whose
# 64 KB packets would make a session a tenth of the packets it is on a real path, and exceed the
# snapshot length below).
MTU_BYTES = 1500
# tcpdump with --immediate-mode on a link with offloads gives every packet a ring slot of the
# snapshot length (libpcap): with the default 262,144 bytes an 8 MiB buffer holds 32 packets, and
# four sessions lost 910 to 10,792 of their ~45,000 packets; with 1,600 bytes (a whole 1,514-byte
# frame) none of 39,867 was lost.
SNAPLEN_BYTES = 1600
READY_TIMEOUT_S = 5.0
DRAIN_QUIET_S = 0.2
DRAIN_MAX_S = 3.0
STOP_TIMEOUT_S = 5.0
PR_SET_PDEATHSIG = 1


@dataclass(frozen=True)
class SessionPlan:
    """What the session carries. The client streams `up_frames` `realtimeInput` chunks of 100 ms
    of 16 kHz 16-bit audio; every `reply_every` of them the server answers with `reply_chunks`
    100 ms chunks of 24 kHz audio and a transcription, `generationComplete` and `turnComplete`.
    Then the client closes with 1000, or, with `idle_close_s`, goes silent and the server closes
    1011 after that long without a client message (L7's idle reaping)."""

    up_frames: int = 9000
    reply_every: int = 200
    reply_chunks: int = 50
    idle_close_s: float | None = None
    compression: bool = False

    @property
    def frames(self) -> int:
        """The WebSocket frames the session carries: setup and setupComplete, the audio each
        way, three text frames an answer, and a close each way."""
        return 2 + self.up_frames + self.up_frames // self.reply_every * (self.reply_chunks + 3) + 2


def _audio(rate_hz: int, seconds: float, seed: int) -> str:
    """Base64 of `seconds` of 16-bit mono audio: noise, which compresses as little as speech."""
    return base64.b64encode(random.Random(seed).randbytes(int(rate_hz * seconds) * 2)).decode()


def _model_turn(data: str) -> str:
    return json.dumps({"serverContent": {"modelTurn": {"parts": [
        {"inlineData": {"mimeType": "audio/pcm;rate=24000", "data": data}}]}}})


SETUP = json.dumps({"setup": {"model": "models/synthetic-live"}})
SETUP_COMPLETE = json.dumps({"setupComplete": {}})
# What the server sends after an answer's audio.
ANSWER_END = (json.dumps({"serverContent": {"outputTranscription": {"text": "Here is the answer."}}}),
              json.dumps({"serverContent": {"generationComplete": True}}),
              json.dumps({"serverContent": {"turnComplete": True}}))
CLIENT_CLOSE = (1000, "bye")


def audio_messages() -> tuple[str, str]:
    """The client's audio chunk and the server's, the same every time."""
    return (json.dumps({"realtimeInput": {"audio": {"mimeType": "audio/pcm;rate=16000",
                                                    "data": _audio(16000, 0.1, 2)}}}),
            _model_turn(_audio(24000, 0.1, 1)))


def texts(plan: SessionPlan) -> tuple[list[str], list[str]]:
    """The text messages the session sends, the client's and the server's, each in order."""
    up, down = audio_messages()
    answer = [down] * plan.reply_chunks + list(ANSWER_END)
    return ([SETUP] + [up] * plan.up_frames,
            [SETUP_COMPLETE] + answer * (plan.up_frames // plan.reply_every))


async def _serve_and_talk(plan: SessionPlan, folder: Path) -> None:
    from websockets.asyncio.client import connect
    from websockets.asyncio.server import ServerConnection, serve
    from websockets.exceptions import ConnectionClosed

    from faultlab.tls import LabCA

    ca = LabCA(folder / "ca")
    os.environ["SSLKEYLOGFILE"] = str(create_private(folder / "emulator-keys.log"))
    server_ctx = ca.server_context()
    client_ctx = ssl.create_default_context(cafile=str(ca.cert_path))
    client_ctx.keylog_filename = str(create_private(folder / "client-keys.log"))
    compression = "deflate" if plan.compression else None
    up, down = audio_messages()

    async def answer(ws: ServerConnection) -> None:
        received = 0
        while True:
            try:
                message = await asyncio.wait_for(ws.recv(), plan.idle_close_s)
            except TimeoutError:
                await ws.close(*REAPING_CLOSE)
                return
            except ConnectionClosed:
                return
            if "setup" in json.loads(message):
                await ws.send(SETUP_COMPLETE)
                continue
            received += 1
            if received % plan.reply_every == 0:
                for _ in range(plan.reply_chunks):
                    await ws.send(down)
                for text in ANSWER_END:
                    await ws.send(text)

    async with (
        serve(answer, "127.0.0.1", PORT, ssl=server_ctx, compression=compression, max_size=None,
              ping_interval=None),
        connect(f"wss://localhost:{PORT}/", ssl=client_ctx, compression=compression,
                max_size=None, ping_interval=None) as ws,
    ):
        await ws.send(SETUP)
        await ws.recv()
        # The client closes once every answer is in: a close that overtook the last answer
        # would cut it short.
        answers = plan.up_frames // plan.reply_every
        answered = asyncio.Event()

        async def listen() -> None:
            turns = 0
            try:
                async for message in ws:
                    turns += '"turnComplete"' in str(message)
                    if turns >= answers:
                        answered.set()
            except ConnectionClosed:
                pass
            finally:
                answered.set()

        listening = asyncio.create_task(listen())
        for _ in range(plan.up_frames):
            await ws.send(up)
        if answers == 0:
            answered.set()
        await answered.wait()
        if plan.idle_close_s is None:
            await ws.close(*CLIENT_CLOSE)
        await listening


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """End one process this module started, by its id: SIGTERM, then SIGKILL."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _die_with_parent() -> None:
    """In a child, before exec: SIGKILL when the parent dies, so a SIGKILLed recording leaves no
    process (and so no namespace: it has no name, and goes with its last process)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def _wait_listening(tcpdump: subprocess.Popen[bytes]) -> None:
    assert tcpdump.stderr is not None
    deadline = time.monotonic() + READY_TIMEOUT_S
    seen = b""
    while time.monotonic() < deadline:
        ready, _, _ = select.select([tcpdump.stderr], [], [], 0.1)
        if ready:
            line = tcpdump.stderr.readline()
            seen += line
            if b"listening on" in line:
                return
            if not line:
                break
    raise LabError(f"tcpdump did not start: {seen.decode(errors='replace').strip()}")


def _drain(path: Path) -> None:
    """Wait until tcpdump has written what the kernel still buffered (its file stops growing)."""
    deadline = time.monotonic() + DRAIN_MAX_S
    size, quiet_since = -1, time.monotonic()
    while time.monotonic() < deadline:
        now_size = path.stat().st_size
        if now_size != size:
            size, quiet_since = now_size, time.monotonic()
        elif time.monotonic() - quiet_since >= DRAIN_QUIET_S:
            return
        time.sleep(0.05)


def record(plan: SessionPlan, folder: Path, timeout_s: float = 120) -> Path:
    """Run the session in a network namespace of its own with tcpdump on its loopback; `folder`
    then holds the capture and both key logs. The namespace is unnamed (`unshare --net`): it goes
    with its processes, which end on return, on an error, on Ctrl-C, and with this process."""
    folder.mkdir(parents=True, exist_ok=True)
    recorder = subprocess.Popen(
        ["unshare", "--net", "--", sys.executable, "-m", "faultlab.capture.synthetic",
         json.dumps(asdict(plan)), str(folder)],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        preexec_fn=_die_with_parent)
    try:
        out, _ = recorder.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise LabError(f"the synthetic session took over {timeout_s:g} s") from None
    finally:
        _stop(recorder)
        if recorder.stdout is not None:
            recorder.stdout.close()
    if recorder.returncode != 0:
        raise LabError(f"the synthetic session failed: {out.decode(errors='replace')[-2000:]}")
    return folder


def _record_here(plan: SessionPlan, folder: Path) -> None:
    """In the new namespace: its loopback with a real link's packet size, tcpdump on it, then
    the session, and the capture drained before tcpdump stops."""
    for argv in (["ip", "link", "set", "lo", "mtu", str(MTU_BYTES), "up"],
                 ["ip", "link", "set", "lo", "gso_max_size", str(MTU_BYTES)]):
        done = subprocess.run(argv, check=False, capture_output=True)
        if done.returncode != 0:
            raise LabError(f"{' '.join(argv)}: {done.stderr.decode(errors='replace').strip()}")
    capture = folder / "capture.pcap"
    create_private(capture)
    # As root, tcpdump drops to the `tcpdump` user, who cannot write a private folder.
    tcpdump = subprocess.Popen(
        ["tcpdump", "-i", "lo", "-w", str(capture), "-U", "--immediate-mode", "-B", "8192",
         "-s", str(SNAPLEN_BYTES), "-n", "-Z", "root", "tcp"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
        preexec_fn=_die_with_parent)
    try:
        _wait_listening(tcpdump)
        asyncio.run(_serve_and_talk(plan, folder))
        _drain(capture)
    finally:
        _stop(tcpdump)
        if tcpdump.stderr is not None:
            tcpdump.stderr.close()


def main() -> None:
    """The recording, inside the namespace `record` made: tcpdump, the server and the client."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("plan", help="the SessionPlan as JSON")
    parser.add_argument("folder", type=Path)
    args = parser.parse_args()
    _record_here(SessionPlan(**json.loads(args.plan)), args.folder)


if __name__ == "__main__":
    main()
