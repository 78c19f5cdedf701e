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
service end with the run.

And a call whose path loses UDP while the bot's booking is pending: the page restarts the call's
peer connection as pipecat's clients do (restart_pc), and pipecat's pipeline, model session and
pending booking go on: the bot's word of the booking reaches the page on the new one."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from faultlab.browser.chromium import unavailable
from faultlab.report.record import RESULT_FILE

from ..conftest import REPO, faultlab, patience
from .helpers import lab_traces, pid_alive, run_events, run_slot

pytestmark = [pytest.mark.lab, pytest.mark.alone]

AGENT = Path(__file__).parent / "pipecat_agent"
PIPECAT = REPO / ".venv-pipecat" / "bin" / "python"
PORT = 7860  # pipecat's examples' own
BOOKING = "Book me the 3pm slot tomorrow, please."
# The page gives up after 131 s at worst (page/index.html: its ICE servers asked 10 s, the call's
# gathering 5 s, its offer answered 10 s, its connection 15 s; the answer 60 s, a second more to
# notice, and a restart begun then 30 s more); the browser's own limit is past that.
READY_S, PAGE_S, CLIENT_S = patience(60), patience(140), patience(155)
RUN_TIMEOUT_S = READY_S + CLIENT_S + patience(30)


def profile(folder: Path, name: str, description: str, scenario: str, booking_s: float = 0) -> Path:
    """The bot as a program target, the page as its user; `scenario`: the profile's `turn`,
    `timeline` and `expect`."""
    path = folder / f"{name}.yaml"
    path.write_text(f"""
name: {name}
description: {description}
target:
  command: [{PIPECAT}, {AGENT / 'bot.py'}, "{PORT}", {sys.executable}, "{booking_s}"]
  port: {PORT}
  ready_timeout: {READY_S}s
hosts: [bot.test]
mic: {{utterances: ["{BOOKING}"]}}
client:
  browser:
    serve: {AGENT / 'page'}
    path: /?bot=http://bot.test:{PORT}
    done: client.done
    timeout: {PAGE_S}s
timeout: {CLIENT_S}s
{scenario}""")
    return path


UDP_BLOCKED = """\
turn: {udp: true, tcp: true, tls: true}
timeline:
  - id: no-udp
    when: {at: 0s}
    do: {fault: drop, protocol: udp, direction: to_server}
expect:
  - {candidate: [relay/tcp, relay/tls]}
  - {count: {event: bot.tool_call}, equals: 1}
  - {count: {event: client.lost}, equals: 0}
  - {exit_code: 0}
"""

# The booking takes 24 s; the path carries no UDP for 14 s from its start. Chrome's ICE says
# disconnected 6 s into such a loss (measured: 5.9-6.1 s; a 5 s loss it saw only after the path
# was back, and went on); the page restarts the call's peer connection 2 s later (8.1-8.2 s in),
# which connects once the path is back (in 10-30 ms), well before the booking is done.
TUNNEL = """\
timeline:
  - id: tunnel
    when: {event: bot.tool_call}
    do: {fault: drop, protocol: udp}
  - when: {step: tunnel}
    after: 14s
    do: {fault: restore, faults: [tunnel]}
expect:
  - {event: client.ice, where: {state: restart}, within: 14s,
     after: {event: fault.applied, where: {step: tunnel}}}
  - {event: bot.restart}
  - {count: {event: bot.tool_call}, equals: 1}
  - {count: {event: bot.booked}, equals: 1}
  - {count: {event: client.lost}, equals: 0}
  - {exit_code: 0}
"""


@pytest.fixture(scope="module")
def calls(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Both calls' profiles run at once, each in its own lab (one after another they took 21 s
    and 38 s); their run folders by the profile's name."""
    assert PIPECAT.exists(), f"no {PIPECAT}: `make install` makes it"
    folder = tmp_path_factory.mktemp("pipecat")
    paths = [profile(folder, "pipecat-smallwebrtc-udp-blocked",
                     "A pipecat SmallWebRTC bot called from the browser with UDP blocked.",
                     UDP_BLOCKED),
             profile(folder, "pipecat-smallwebrtc-restart",
                     "A pipecat SmallWebRTC call whose path loses UDP while a booking is pending.",
                     TUNNEL, booking_s=24)]
    done = faultlab("run", "-q", "--jobs", "2", "--no-timeline", "--runs-dir", str(folder),
                    *map(str, paths), timeout=RUN_TIMEOUT_S)
    runs = {path.stem: run for path in paths for run in folder.glob(f"*-{path.stem}")
            if run.is_dir()}
    assert len(runs) == len(paths), done.stdout[-6000:] + done.stderr
    return runs


@pytest.mark.skipif(bool(unavailable()), reason=unavailable() or "")
@pytest.mark.timeout(RUN_TIMEOUT_S + 60)
def test_a_pipecat_bot_called_from_the_browser_with_udp_blocked(calls: dict[str, Path]) -> None:
    run, events = called(calls, "pipecat-smallwebrtc-udp-blocked")

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


@pytest.mark.skipif(bool(unavailable()), reason=unavailable() or "")
@pytest.mark.timeout(RUN_TIMEOUT_S + 60)
def test_the_page_restarts_the_call_s_peer_connection_and_the_pending_booking_is_told(
        calls: dict[str, Path]) -> None:
    """The path carries no UDP for 14 s from the bot's tool call (its booking takes 24 s): the
    page's ICE goes disconnected, it restarts the call's peer connection (pipecat's restart_pc:
    a new one for the same pc_id), which connects once the path is back; the bot's pipeline,
    model session and pending booking went on, and its answer reaches the page on the new one."""
    run, events = called(calls, "pipecat-smallwebrtc-restart")

    def first(name: str, **where: object) -> float:
        return next(float(str(e["t"])) for e in events if e["event"] == name
                    and all(e.get(k) == v for k, v in where.items()))

    # The path is back from when the restore began: its `fault.applied` is stamped once done,
    # and `fault.reverted` just before that, after the rule went (under load the new peer
    # connection came up in between: 23.0995 s against the stamp's 23.1037 s, 19 ms to restore).
    (restore,) = [e for e in events if e["event"] == "fault.applied" and e["fault"] == "restore"]
    back = float(str(restore["t"])) - float(str(restore["applied_in_ms"])) / 1000
    # In this order: the path lost, the page restarted, the bot took the new peer connection,
    # the path back, the new one up, the booking done, and the bot's word of it on the page.
    order = [first("fault.applied", step="tunnel"), first("client.ice", state="restart"),
             first("bot.restart"), back, first("bot.connected", again=True), first("bot.booked")]
    assert order == sorted(order), order
    told = [e for e in events if e["event"] == "client.answer" and float(str(e["t"])) > order[-1]]
    assert told and "booked" in str(told[0]["text"]), told
    assert [e["again"] for e in events if e["event"] == "bot.connected"] == [False, True]
    # The bot's voice on the new one: the page counts it from the restart on.
    played = [float(str(e["received_s"])) for e in events if e["event"] == "client.audio_stats"
              and float(str(e["t"])) > order[1]]
    assert played and max(played) > 2.0, played

    owner = next(int(str(e["pid"])) for e in events if e["event"] == "run.start")
    assert lab_traces(run_slot(run), owner) == []


def called(calls: dict[str, Path], name: str) -> tuple[Path, list[dict[str, object]]]:
    """The run of the profile `name` (which must have passed): its folder and events, what the
    call did printed."""
    run = calls[name]
    events = run_events(run)
    print(what_it_did(events))
    record = json.loads((run / RESULT_FILE).read_text())
    assert record["verdict"] == "PASS", ((run / "summary.md").read_text()
                                         + (run / "target.log").read_text()[-4000:])
    return run, events


def what_it_did(events: list[dict[str, object]]) -> str:
    """The call as the run saw it, one line an event of the bot's or the page's."""
    shown = ("fault.applied", "fault.reverted", "client.ice", "client.candidate_pair",
             "bot.connected", "bot.restart", "bot.heard", "bot.tool_call", "bot.booked",
             "bot.said", "client.answer", "client.lost", "bot.disconnected", "client.done")
    lines = [f"{float(str(e['t'])):7.2f} {e['event']} "
             + " ".join(f"{k}={v}" for k, v in e.items() if k not in ("t", "event", "source", "ts"))
             for e in events if e["event"] in shown]
    stats = [e for e in events if e["event"] == "client.audio_stats"]
    if stats:
        lines.append(f"audio heard: {stats[-1]['received_s']} s, concealed {stats[-1]['concealed_s']} s, "
                     f"RTP lost {stats[-1]['packets_lost']}")
    return "\n".join(lines)
