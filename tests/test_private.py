"""Secrets are redacted by every writer of a run's artifacts, and what holds them is private."""

from __future__ import annotations

import json
import os
import secrets
import stat
from datetime import datetime
from pathlib import Path

import pytest

from faultlab.events import EventBus, EventWriter, RunClock
from faultlab.private import (
    create_private,
    credentials,
    open_private,
    redact,
    redact_file,
    redact_process_files,
    redact_text,
    remember_env_secrets,
    remember_secrets,
)
from faultlab.profile import parse_profile
from faultlab.report.record import RunRecord
from faultlab.report.suite import write_suite
from faultlab.report.summary import write_summary
from faultlab.result import RunResult

KEY = "AIzaSyTestKeyForRedaction0123456789abcd"
HANDLE = "0b7e0ae6-5a2b-4c36-9e1b-6f1b2f3f0a11"


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def env_key(monkeypatch: pytest.MonkeyPatch) -> str:
    """A key of a real key's length (39), new to this process, in the environment."""
    key = "AIzaSy" + secrets.token_hex(17)[:33]
    monkeypatch.setenv("GEMINI_API_KEY", key)
    return key


def test_query_parameters_are_redacted_in_any_case() -> None:
    """`key=` and `access_token=` lose their values wherever a URL appears; other parameters stay."""
    out = redact_text(f"GET /ws/x?alt=json&KEY={KEY}&Access_Token=ya29.abc HTTP/1.1")
    assert KEY not in out and "ya29.abc" not in out
    assert out.startswith("GET /ws/x?alt=json&KEY=<redacted len=39 ")
    assert redact_text("monkey=1") == "monkey=1" and redact_text("?key=&a") == "?key=&a"


def test_headers_are_redacted_in_any_notation() -> None:
    """An HTTP header line, a dict's repr and JSON all lose the header's value."""
    for text in (f"x-goog-api-key: {KEY}", f"{{'X-Goog-Api-Key': '{KEY}'}}",
                 f'{{"authorization": "Bearer {KEY}"}}'):
        assert KEY not in redact_text(text), text
    assert redact_text("Authorization: Bearer abc") == (
        "Authorization: Bearer <redacted len=3 sha256=ba7816bf>")


def test_the_environment_key_is_redacted_wherever_it_appears(tmp_path: Path,
                                                            env_key: str) -> None:
    """A writer made in an environment with an API key finds it by value, in free text and in
    any field."""
    writer = EventWriter(tmp_path / "client.events.jsonl")
    writer.emit("client.start", argv=["client", "--key", env_key], note=f"using {env_key}.")
    writer.close()
    out = json.loads((tmp_path / "client.events.jsonl").read_text())
    assert env_key not in json.dumps(out)
    assert out["note"].startswith("using <redacted len=39 ") and out["note"].endswith(">.")


def test_remembered_values_are_redacted_but_not_short_ones() -> None:
    """A credential a process learns is redacted from then on; a value too short to be a key is
    not, or it would erase ordinary text."""
    remember_secrets(["remembered-credential-1", "x"])
    assert redact_text("a remembered-credential-1 b x") == (
        f"a {redact({'key': 'remembered-credential-1'})['key']} b x")


def test_handles_are_redacted_by_field_name_and_by_shape() -> None:
    """A handle under any name ending in `handle`, and a UUID anywhere, get the same redaction."""
    out = redact({"sessionHandle": "opaque", "resume_handle": HANDLE, "log": f"got {HANDLE}"})
    assert out["sessionHandle"].startswith("<redacted len=6 ")
    assert out["log"] == f"got {out['resume_handle']}"
    assert HANDLE not in json.dumps(out)


def test_text_redaction_is_idempotent(env_key: str) -> None:
    """What a client's writer redacted is not redacted again by the bus or at teardown."""
    remember_env_secrets()
    once = redact_text(f"?key={env_key} {HANDLE} x-goog-api-key: {env_key}")
    assert redact_text(once) == once


def test_credentials_of_a_request() -> None:
    """The values a request authenticates with: its query's and its headers', and a browser's
    key offered as a subprotocol (OpenAI Realtime)."""
    assert credentials("/ws/x?key=k1&access_token=t1", {"authorization": "Bearer t2"}) == [
        "k1", "t1", "t2"]
    assert credentials("/v1/realtime?model=m", {
        "sec-websocket-protocol": "realtime, openai-insecure-api-key.sk-browser-1"}) == [
        "sk-browser-1"]
    # Header names as a capture keeps them, as sent.
    assert credentials("/ws/x", {"X-Goog-Api-Key": "k3", "Authorization": "Bearer t4"}) == [
        "k3", "t4"]


def test_a_key_offered_as_a_subprotocol_is_redacted() -> None:
    """OpenAI's browser clients put their key in Sec-WebSocket-Protocol; the rest stays."""
    out = redact_text(f"Sec-WebSocket-Protocol: realtime, openai-insecure-api-key.{KEY}")
    assert KEY not in out
    assert out.startswith("Sec-WebSocket-Protocol: realtime, openai-insecure-api-key.<redacted ")


def test_bus_and_writer_files_are_private_and_redacted(tmp_path: Path, env_key: str) -> None:
    """events.jsonl and a process's event file are 0600 and hold no secret, even in a value
    json cannot encode."""
    bus = EventBus(RunClock(), tmp_path / "events.jsonl")
    bus.emit("proxy", "proxy.ws_start", path=f"/ws?key={env_key}", where=Path(env_key))
    bus.close()
    writer = EventWriter(tmp_path / "client.events.jsonl")
    writer.emit("client.connected", url=f"wss://h/ws?key={env_key}")
    writer.close()
    for name in ("events.jsonl", "client.events.jsonl"):
        assert mode(tmp_path / name) == 0o600
        assert env_key not in (tmp_path / name).read_text()


def test_process_files_are_redacted_at_the_end(tmp_path: Path, env_key: str) -> None:
    """A process's log and its raw event lines are rewritten without secrets, JSON field by
    field; a key log and a file with nothing to redact are left alone."""
    log = tmp_path / "client.log"
    log.write_text(f"connecting with key {env_key}\nbinary \xff ok\n")
    events = tmp_path / "client.events.jsonl"
    events.write_text(json.dumps({"event": "client.handle", "handle": "opaque"}) + "\nnot json\n")
    keys = tmp_path / "keys.log"
    keys.write_text(f"CLIENT_RANDOM {HANDLE}\n")
    clean = tmp_path / "target.log"
    clean.write_text("nothing here\n")
    before = clean.stat().st_mtime_ns
    assert redact_process_files(tmp_path) == [events, log]
    assert log.read_text() == (f"connecting with key {redact_text(env_key)}\n"
                               "binary \xff ok\n")
    assert json.loads(events.read_text().splitlines()[0])["handle"].startswith("<redacted len=6 ")
    assert keys.read_text() == f"CLIENT_RANDOM {HANDLE}\n"
    assert clean.stat().st_mtime_ns == before
    assert mode(log) == 0o600 and not redact_file(tmp_path / "missing.log")
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_private_files_stay_private(tmp_path: Path) -> None:
    """A file made public before it is opened privately loses its group and other bits; one
    created for a process to append to keeps its content."""
    path = tmp_path / "keys.log"
    path.write_text("kept\n")
    os.chmod(path, 0o644)
    create_private(path)
    assert mode(path) == 0o600 and path.read_text() == "kept\n"
    with open_private(tmp_path / "capture.pcap", "wb") as f:
        f.write(b"\xd4\xc3\xb2\xa1")
    assert mode(tmp_path / "capture.pcap") == 0o600


def test_summary_suite_table_and_result_are_redacted(tmp_path: Path, env_key: str) -> None:
    """What the run writes for people is redacted too, and private."""
    profile = parse_profile(f"name: s\ndescription: key is {env_key}\nclient: {{command: [x]}}\n")
    result = RunResult(profile, tmp_path, datetime.now(), error=f"bad url ?key={env_key}")
    write_summary(result, tmp_path / "summary.md")
    write_suite([RunRecord.of(result)], tmp_path / "suite.md")
    RunRecord.of(result).write(tmp_path)
    for name in ("summary.md", "suite.md", "result.json"):
        assert env_key not in (tmp_path / name).read_text() and mode(tmp_path / name) == 0o600


def test_a_short_text_seen_before_a_secret_is_learnt_is_redacted_after() -> None:
    """Short texts' redactions are remembered, and forgotten when a new secret is learnt."""
    text = "late-credential-42"
    assert redact_text(text) == text
    remember_secrets([text])
    assert redact_text(text) != text and text not in redact_text(text)
