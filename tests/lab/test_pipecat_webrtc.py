"""A public voice-agent stack as the subject: a pipecat SmallWebRTC bot (pipecat-ai from PyPI,
unmodified, in `.venv-pipecat`: pipecat_agent/bot.py), its user a web page in the lab's Chromium
(pipecat_agent/page/), under a firewall that lets no UDP out of the user's network. The bot runs
as a program target in the server namespace, its model the emulator on its own loopback; the
lab's TURN server listens on UDP, TCP and TLS, and the bot's server hands the page its URLs.

What pipecat does there, as the test reads it back: the page's relays over TCP and TLS are the
only way in, and aiortc, the bot's ICE, reaches the relay from its host candidate, so the call
goes over TURN on TCP or TLS; the user's spoken request crosses it (the model's transcript),
the bot books once and says so, and its voice reaches the page, no RTP packet lost on the way (TCP
carries the relay's leg). Nothing of the lab is left: the browser, coturn, the bot and its model
service end with the run."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from faultlab.browser.chromium import unavailable

from ..conftest import REPO, faultlab, patience
from .helpers import lab_traces, pid_alive, run_events, run_slot

pytestmark = [pytest.mark.lab, pytest.mark.alone]

AGENT = Path(__file__).parent / "pipecat_agent"
PIPECAT = REPO / ".venv-pipecat" / "bin" / "python"
PORT = 7860  # pipecat's examples' own
BOOKING = "Book me the 3pm slot tomorrow, please."
# The page gives up after 63 s at worst (page/index.html: ICE gathering 5 s, the call's connection
# 15 s, the answer 40 s, 3 s more of its voice); the browser's own limit is past that.
READY_S, PAGE_S, CLIENT_S = patience(60), patience(75), patience(90)
RUN_TIMEOUT_S = READY_S + CLIENT_S + patience(30)


def profile(folder: Path) -> Path:
    path = folder / "pipecat-udp-blocked.yaml"
    path.write_text(f"""
name: pipecat-smallwebrtc-udp-blocked
description: A pipecat SmallWebRTC bot called from the browser with UDP blocked.
target:
  command: [{PIPECAT}, {AGENT / 'bot.py'}, "{PORT}", {sys.executable}]
  port: {PORT}
  ready_timeout: {READY_S}s
hosts: [bot.test]
turn: {{udp: true, tcp: true, tls: true}}
mic: {{utterances: ["{BOOKING}"]}}
client:
  browser:
    serve: {AGENT / 'page'}
    path: /?bot=http://bot.test:{PORT}
    done: client.done
    timeout: {PAGE_S}s
timeline:
  - id: no-udp
    when: {{at: 0s}}
    do: {{fault: drop, protocol: udp, direction: to_server}}
expect:
  - {{candidate: [relay/tcp, relay/tls]}}
  - {{count: {{event: bot.tool_call}}, equals: 1}}
  - {{count: {{event: client.lost}}, equals: 0}}
  - {{exit_code: 0}}
timeout: {CLIENT_S}s
""")
    return path


@pytest.mark.skipif(bool(unavailable()), reason=unavailable() or "")
@pytest.mark.timeout(RUN_TIMEOUT_S + 60)
def test_a_pipecat_bot_called_from_the_browser_with_udp_blocked(tmp_path: Path) -> None:
    assert PIPECAT.exists(), f"no {PIPECAT}: `make install` makes it"
    done = faultlab("run", "--no-timeline", "--runs-dir", str(tmp_path), str(profile(tmp_path)),
                    timeout=RUN_TIMEOUT_S)
    (run,) = [p for p in tmp_path.glob("*-pipecat-*") if p.is_dir()]
    events = run_events(run)
    print(what_it_did(events))
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr + (run / "target.log").read_text()[-4000:]

    pairs = [e for e in events if e["event"] == "client.candidate_pair"]
    assert pairs and pairs[-1]["local"] == "relay" and pairs[-1]["turn"] in ("tcp", "tls"), pairs
    heard = [str(e["text"]) for e in events if e["event"] == "bot.heard"]
    assert any(re.search(r"3\s?pm", t, re.I) for t in heard), heard
    (call,) = [e for e in events if e["event"] == "bot.tool_call"]
    assert call["name"] == "book_slot" and "3" in str(call["args"]), call
    told = [e for e in events if e["event"] == "client.answer" and float(str(e["t"])) > call["t"]]
    assert told and "booked" in str(told[0]["text"]), told
    # Its voice played on the page: the greeting and the booking's reply, every packet of it.
    stats = [e for e in events if e["event"] == "client.audio_stats"]
    assert stats and float(str(stats[-1]["received_s"])) > 2.0, stats[-1:]
    assert stats[-1]["packets_lost"] == 0, stats[-1]
    # The bot's model service ended with it.
    (model,) = [int(str(e["pid"])) for e in events if e["event"] == "bot.model"]
    assert not pid_alive(model)

    owner = next(int(str(e["pid"])) for e in events if e["event"] == "run.start")
    assert lab_traces(run_slot(run), owner) == []
    started = [int(str(e["pid"])) for e in events if e["event"] in ("process.start", "browser.start")]
    assert started and not [pid for pid in started if pid_alive(pid)]


def what_it_did(events: list[dict[str, object]]) -> str:
    """The call as the run saw it, one line an event of the bot's or the page's."""
    shown = ("client.ice", "client.candidate_pair", "bot.connected", "bot.heard", "bot.tool_call",
             "bot.said", "client.answer", "client.lost", "bot.disconnected", "client.done")
    lines = [f"{float(str(e['t'])):7.2f} {e['event']} "
             + " ".join(f"{k}={v}" for k, v in e.items() if k not in ("t", "event", "source", "ts"))
             for e in events if e["event"] in shown]
    stats = [e for e in events if e["event"] == "client.audio_stats"]
    if stats:
        lines.append(f"audio heard: {stats[-1]['received_s']} s, concealed {stats[-1]['concealed_s']} s, "
                     f"RTP lost {stats[-1]['packets_lost']}")
    return "\n".join(lines)
