"""The programs webrtc_bench.py runs in its labs.

    python bench/webrtc_peers.py echo PORT          # UDP echo, and a TCP listener (the lab's
                                                    # sign that the target is up), on PORT
    python bench/webrtc_peers.py ping SECONDS OUT   # an RTP-sized datagram every 20 ms to
                                                    # the target (FAULTLAB_TARGET_HOST, _PORT),
                                                    # echoed: each round trip (s) into OUT
    python bench/webrtc_peers.py calls COUNT SECONDS OUT
                                                    # COUNT concurrent WebRTC calls to the
                                                    # emulator (OPENAI_BASE_URL), each sending
                                                    # its microphone's 20 ms Opus packets in
                                                    # real time; the worst send lag (ms) into
                                                    # OUT

A call here is what the `openai-webrtc` client makes (faultlab.webrtc.peer_connection, the
openai SDK's `realtime.calls.create`), without its conversation: the load is the audio, the
microphone's silence as aiortc encodes it, encoded once (aiortc sends a track's `av.Packet` as
it is, and encodes an `AudioFrame` first).
"""

from __future__ import annotations

import asyncio
import fractions
import itertools
import json
import os
import socket
import sys
import time
from pathlib import Path
from typing import Any

# An Opus packet of 20 ms of speech with its RTP and SRTP headers: ~120-200 bytes.
RTP_BYTES = 172
PACKET_EVERY_S = 0.02


async def echo(port: int) -> None:
    class Echo(asyncio.DatagramProtocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            self.transport = transport

        def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
            self.transport.sendto(data, addr)  # type: ignore[attr-defined]

    loop = asyncio.get_running_loop()
    await loop.create_datagram_endpoint(Echo, local_addr=("0.0.0.0", port))
    server = await asyncio.start_server(lambda r, w: w.close(), "0.0.0.0", port)
    async with server:
        await server.serve_forever()


def ping(host: str, port: int, seconds: float, out: Path) -> None:
    """Round trips of one datagram every PACKET_EVERY_S, each numbered and waiting up to 1 s
    for its own echo (a late echo of an earlier one is read past; an ICMP refusal, the echo not
    up yet, counts as no echo)."""
    rtts: list[float] = []
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.settimeout(1.0)
        sock.connect((host, port))
        end = time.monotonic() + seconds
        for seq in itertools.count():
            if time.monotonic() >= end:
                break
            sent = time.perf_counter()
            try:
                sock.send(seq.to_bytes(8, "big") + bytes(RTP_BYTES - 8))
                while int.from_bytes(sock.recv(2048)[:8], "big") != seq:
                    pass
                rtts.append(time.perf_counter() - sent)
            except (TimeoutError, ConnectionRefusedError):
                pass
            # The next one a packet's interval after this one, refused at once or not.
            time.sleep(max(0.0, PACKET_EVERY_S - (time.perf_counter() - sent)))
    out.write_text(json.dumps(rtts))


def encoded_silence(frames: int) -> list[bytes]:
    """`frames` 20 ms Opus packets of the microphone's silence, as aiortc's own encoder makes
    them (48 kHz stereo, 96 kb/s, from the track's 24 kHz mono): what each call of the load
    sends, encoded once instead of once a frame per call. Encoding in the load (20 calls
    resampling and encoding at once, on the cores the emulator runs on) made the load lag
    418 ms handing its frames over, which the emulator's figure could not tell from its own."""
    import numpy as np
    from aiortc.codecs.opus import OpusEncoder
    from av import AudioFrame

    from faultlab.webrtc import FRAME_SAMPLES, RATE

    encoder, packets = OpusEncoder(), list[bytes]()
    while len(packets) < frames:
        frame = AudioFrame.from_ndarray(np.zeros((1, FRAME_SAMPLES), dtype="<i2"), format="s16",
                                        layout="mono")
        frame.sample_rate, frame.pts = RATE, len(packets) * FRAME_SAMPLES
        frame.time_base = fractions.Fraction(1, RATE)
        packets += encoder.encode(frame)[0]
    return packets[:frames]


async def calls(count: int, seconds: float, out: Path) -> None:
    import av
    import openai
    from aiortc import MediaStreamTrack, RTCSessionDescription

    from faultlab.webrtc import PTIME_S, peer_connection

    # Opus's first packets differ (its encoder settles); the rest of silence repeat.
    settled = encoded_silence(50)[10:]
    worst_lag = 0.0

    class Microphone(MediaStreamTrack):
        """The microphone's pre-encoded 20 ms packets, in real time (as faultlab.webrtc's
        SpeakerTrack paces its frames), and how late each was handed over. Not a SpeakerTrack:
        its frame of silence, made and thrown away each time, took the 20 calls' worst chunk
        from 85 ms to 118-162 ms late (measured 2026-12-07, one run beside two)."""

        kind = "audio"

        def __init__(self) -> None:
            super().__init__()
            self._start: float | None = None
            self._sent = 0

        async def recv(self) -> av.Packet[Any]:
            nonlocal worst_lag
            now = time.monotonic()
            if self._start is None:
                self._start = now
            else:
                due = self._start + self._sent * PTIME_S
                await asyncio.sleep(max(0.0, due - now))
                worst_lag = max(worst_lag, time.monotonic() - due)
            packet = av.Packet(settled[self._sent % len(settled)])
            packet.pts = self._sent * 960  # 20 ms at Opus's 48 kHz
            packet.time_base = fractions.Fraction(1, 48000)
            self._sent += 1
            return packet

    client = openai.AsyncOpenAI()

    async def call() -> None:
        pc = peer_connection()
        pc.createDataChannel("oai-events")
        pc.addTrack(Microphone())
        try:
            await pc.setLocalDescription(await pc.createOffer())
            answer = await client.realtime.calls.create(
                sdp=pc.localDescription.sdp,
                session={"type": "realtime", "model": "gpt-realtime"})
            await pc.setRemoteDescription(RTCSessionDescription(answer.text, "answer"))
            await asyncio.sleep(seconds)
        finally:
            await pc.close()

    await asyncio.gather(*(call() for _ in range(count)))
    out.write_text(json.dumps({"worst_send_lag_ms": round(worst_lag * 1000, 1)}))


def _out(name: str) -> Path:
    """Where a result goes: in the run's folder when a run started the program."""
    return Path(os.environ.get("FAULTLAB_RUN_DIR", ".")) / name


def main() -> None:
    what, *args = sys.argv[1:]
    if what == "echo":
        asyncio.run(echo(int(args[0])))
    elif what == "ping":
        ping(os.environ["FAULTLAB_TARGET_HOST"], int(os.environ["FAULTLAB_TARGET_PORT"]),
             float(args[0]), _out(args[1]))
    elif what == "calls":
        asyncio.run(calls(int(args[0]), float(args[1]), _out(args[2])))
    else:
        raise SystemExit(f"unknown: {what}")


if __name__ == "__main__":
    os.environ.setdefault("OPENAI_API_KEY", "not-a-real-key")
    main()
