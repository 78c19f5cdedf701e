"""The JavaScript reference clients (faultlab/clients/js/): the builtin `node-booking` run as a user
runs it, with the real @google/genai against a real emulator on loopback (its recovery from faults
is tested in the lab by profiles/web/*-node.yaml, tests/lab/test_web_node.py); and booking.mjs's
twins of faultlab's Python functions held to the same answers."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from faultlab.clients.node import PACKAGE
from faultlab.events import Event
from faultlab.peers import BUILTINS
from faultlab.protocols.gemini import kind_of
from faultlab.scenarios.booking.script import SCRIPT
from faultlab.units import parse_duration

from ..conftest import REPO
from .test_clients import NATIVE, Start, assert_booked_and_told, written

NODE = shutil.which("node")


def run_node_client(tmp_path: Path, *args: str,
                    env: dict[str, str] | None = None) -> tuple[int, list[Event], str]:
    events = tmp_path / "client.events.jsonl"
    done = subprocess.run(
        [sys.executable, "-m", BUILTINS["node-booking"], "--time-scale", "0.1", *args],
        env={**os.environ, "FAULTLAB_EVENTS": str(events), "FAULTLAB_RUN_DIR": str(tmp_path),
             **(env or {})},
        cwd=REPO, capture_output=True, text=True, timeout=60, check=False)
    assert "Traceback" not in done.stderr, done.stderr
    lines = events.read_text().splitlines() if events.exists() else []
    return done.returncode, [written(line) for line in lines], done.stderr


def in_node(script: str, data: Any) -> Any:
    """What a script run as an ES module beside booking.mjs prints (JSON), given `data` (JSON) on
    its standard input as `input`."""
    assert NODE is not None, "node is not installed (make install)"
    source = ("import * as booking from './booking.mjs';\n"
              "let text = ''; for await (const chunk of process.stdin) text += chunk;\n"
              "const input = JSON.parse(text);\n" + script)
    done = subprocess.run([NODE, "--input-type=module", "-e", source], input=json.dumps(data),
                          cwd=PACKAGE, capture_output=True, text=True, timeout=30, check=True)
    return json.loads(done.stdout)


def test_the_node_client_books_answers_the_call_and_tells_the_truth(start_emulator: Start,
                                                                     tmp_path: Path) -> None:
    """On a healthy path the Node client books through the HTTP backend, answers the call by its
    id once it has committed, asks, gets a truthful answer and ends with client.done (0); its
    events are the Python clients' and the ledger holds one booking."""
    start_emulator()
    code, events, _ = run_node_client(tmp_path)
    assert code == 0
    assert_booked_and_told(events, tmp_path)
    assert {e.fields["kind"] for e in events if e.name == "client.received"} >= {
        "tool_call", "server_content.model_turn", "server_content.turn_complete"}
    assert events[-1].name == "client.done" and events[-1].fields == {"code": 0}


def test_a_refused_first_connection_exits_2_with_its_close_code(start_emulator: Start,
                                                                tmp_path: Path) -> None:
    """A setup the server refuses (TEXT replies from a native-audio model: 1007) is
    client.refused with the close code, and exit code 2."""
    start_emulator()
    code, events, _ = run_node_client(tmp_path, "--model", NATIVE)
    assert code == 2
    refused = next(e for e in events if e.name == "client.refused")
    assert refused.fields["code"] == 1007
    assert events[-1].name == "client.done" and events[-1].fields["code"] == 2


def test_an_unreachable_service_exits_2_without_a_code(tmp_path: Path) -> None:
    """Nothing listening: client.refused with no close code and the socket's error, exit 2."""
    with socket.socket() as probe:  # a loopback port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    code, events, _ = run_node_client(tmp_path, env={
        "GOOGLE_API_KEY": "test-key-not-a-secret", "GOOGLE_GEMINI_BASE_URL": f"https://127.0.0.1:{port}"})
    assert code == 2
    refused = next(e for e in events if e.name == "client.refused")
    assert refused.fields["code"] is None and "ECONNREFUSED" in refused.fields["reason"]


def test_without_node_it_says_so_in_one_line(tmp_path: Path) -> None:
    """No `node` on the PATH: one line naming what to do, exit 2, no events."""
    code, events, stderr = run_node_client(tmp_path, env={"PATH": str(tmp_path)})
    assert code == 2 and events == []
    assert stderr.strip() == "node-booking: node is not installed (run make install)"


def test_a_bad_option_is_one_line_and_exit_2(tmp_path: Path) -> None:
    """An option node.mjs does not know, or a duration without its unit, is one line, exit 2."""
    for bad in (["--bogus"], ["--window", "4"]):
        code, _, stderr = run_node_client(tmp_path, *bad)
        assert code == 2 and len(stderr.strip().splitlines()) == 1, stderr


def test_kinds_are_named_as_faultlab_names_them() -> None:
    """booking.mjs's kindOf gives gemini.py's kind_of answer for every shape of message."""
    messages: list[dict[str, Any]] = [
        {}, {"setupComplete": {}}, {"toolCall": {"functionCalls": [{"id": "a", "name": "b"}]}},
        {"serverContent": {"turnComplete": True}},
        {"serverContent": {"generationComplete": True, "turnComplete": True}},
        {"serverContent": {"modelTurn": {"parts": [{"text": "hi"}]}, "turnComplete": False}},
        {"serverContent": {"outputTranscription": {"text": "x"}, "modelTurn": {"parts": []},
                           "interrupted": True, "waitingForInput": True}},
        {"serverContent": {}}, {"usageMetadata": {"totalTokenCount": 3}},
        {"usageMetadata": {"totalTokenCount": 3}, "serverContent": {"turnComplete": True}},
        {"sessionResumptionUpdate": {"newHandle": "h", "resumable": True}},
        {"goAway": {"timeLeft": "5s"}}, {"realtimeInput": {"audio": {"data": ""}}},
        {"realtime_input": {"audioStreamEnd": True}}, {"toolCallCancellation": {"ids": ["a"]}},
        {"voiceActivity": "START"}, {"tool_call": []},
    ]
    assert in_node("console.log(JSON.stringify(input.map(booking.kindOf)));", messages) == [
        kind_of(m) for m in messages]


def test_durations_are_read_as_faultlab_reads_them() -> None:
    """parseDuration agrees with faultlab.units.parse_duration, and refuses a bare number."""
    texts = ["500ms", "2s", "1.5s", ".5s", " 3 s ", "2m", "1h"]
    assert in_node("console.log(JSON.stringify(input.map(booking.parseDuration)));", texts) == [
        pytest.approx(parse_duration(t)) for t in texts]
    assert in_node("try { booking.parseDuration(input); console.log('true'); }"
                   " catch { console.log('false'); }", "4") is False


def test_the_script_is_read_as_python_reads_it() -> None:
    """script.mjs reads conversation.json's phrases, timings, model, tool and exit codes with
    the values faultlab.scenarios.booking.script reads (camel-cased option names)."""
    got = in_node("const script = await import('./script.mjs');\n"
                  "console.log(JSON.stringify({defaults: booking.DEFAULTS, exit: script.EXIT,"
                  " tool: script.toolDeclaration()}));", None)
    camel = {"ask_after": "askAfter", "retry_after": "retryAfter", "window": "window",
             "connect_timeout": "connectTimeout", "ping_interval": "pingInterval",
             "lost_after": "lostAfter", "quiet": "quiet", "duration": "duration"}
    assert set(camel) == set(SCRIPT.defaults_s)
    assert got["defaults"] == {
        "say": SCRIPT.say, "ask": SCRIPT.ask, "model": SCRIPT.models["gemini"],
        **{camel[name]: seconds for name, seconds in SCRIPT.defaults_s.items()},
        "audio": False, "mic": False, "statusNote": True}
    assert got["exit"] == SCRIPT.exit_codes
    assert got["tool"] == {"name": SCRIPT.tool, "behavior": SCRIPT.tool_behavior,
                           "parameters": {"type": "OBJECT",
                                          "properties": {"slot": {"type": "STRING"}}}}
