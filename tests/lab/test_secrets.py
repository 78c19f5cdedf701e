"""No artifact of a run holds the client's API key or a resumption handle, its cassette included,
and only the run's owner can read what holds secrets (issue 17)."""

from __future__ import annotations

import re
import secrets
import stat
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from .helpers import failed, run_profile

pytestmark = pytest.mark.lab

CLIENT = Path(__file__).with_name("careless_client.py")
# The emulator's handles are UUIDs; nothing else a run writes is one.
UUID = re.compile(rb"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.I)


@dataclass(frozen=True)
class Case:
    via: str  # how the client sends its key: query (`?key=`) or header (x-goog-api-key)
    proxy: bool
    # How the client gets its key: profile (env and argv), profile-env, runner-env, or pass-env
    # (the profile's `pass_env` takes it from the runner's environment).
    given: str


CASES = [Case("query", True, "profile"), Case("header", True, "profile-env"),
         Case("header", False, "runner-env"), Case("query", False, "pass-env")]


def profile_text(case: Case, key: str, handles: Path) -> str:
    args = [str(CLIENT), "--via", case.via, "--handles", str(handles)]
    if case.given == "profile":
        args += ["--key", key]
    env = {"runner-env": "", "pass-env": "  pass_env: [GOOGLE_API_KEY]\n"}.get(
        case.given, f"  env: {{GOOGLE_API_KEY: {key}}}\n")
    return f"""\
name: secrets-{case.via}-{case.given}
proxy: {str(case.proxy).lower()}
record: true
target: {{emulator: {{time_scale: 0.1}}}}
client:
  command: [{sys.executable}, {', '.join(args)}]
{env}expect:
  - {{exit_code: 0}}
timeout: 30s
"""


def leaks(run_dir: Path, key: str, handles: list[str]) -> list[str]:
    """Every file of the run folder, binary ones and the capture included, that holds the key, a
    handle the client was given, or anything shaped like a handle."""
    found = []
    for path in sorted(p for p in run_dir.rglob("*") if p.is_file()):
        data = path.read_bytes()
        name = path.relative_to(run_dir)
        if key.encode() in data or key.lower().encode() in data.lower():
            found.append(f"{name}: the key")
        found += [f"{name}: handle {h}" for h in handles if h.encode() in data]
        found += [f"{name}: {u.decode()}" for u in set(UUID.findall(data))
                  if u.decode() not in handles]
    return found


def loose_modes(run_dir: Path) -> list[str]:
    """Folders others can enter, and files others can read that are not public: only
    certificates (no private key) and the name service files (etc/) may be."""
    found = [] if stat.S_IMODE(run_dir.stat().st_mode) == 0o700 else [f"{run_dir}: folder"]
    for path in sorted(run_dir.rglob("*")):
        mode = stat.S_IMODE(path.stat().st_mode)
        name = path.relative_to(run_dir)
        if path.is_dir():
            if mode != 0o700:
                found.append(f"{name}/: {mode:o}")
            continue
        public = path.name in ("hosts", "resolv.conf", "nsswitch.conf") or (
            path.suffix == ".pem" and b"PRIVATE KEY" not in path.read_bytes())
        if mode & 0o077 and not public:
            found.append(f"{name}: {mode:o}")
    return found


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c.via}-{c.given}")
def test_no_artifact_holds_a_secret(case: Case, tmp_path: Path,
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Whether the key travels in the query or a header, through the proxy or not, and comes
    from the profile or the runner's environment, no file of the run holds it or a handle, and
    key logs, CA keys, the capture, the logs and the events are the owner's alone."""
    key = "fltk" + secrets.token_urlsafe(24).replace("-", "x").replace("_", "y")
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    if case.given == "runner-env":
        monkeypatch.setenv("GEMINI_API_KEY", key)
    if case.given == "pass-env":
        monkeypatch.setenv("GOOGLE_API_KEY", key)
    handles_file = tmp_path / "handles.txt"
    runs = tmp_path / "runs"
    result = run_profile(profile_text(case, key, handles_file), runs)
    run_dir = result.run_dir
    assert result.verdict == "PASS", failed(result) + (run_dir / "client.log").read_text()
    handles = handles_file.read_text().split()
    # A first session and a resumed one: the handle went both ways.
    assert len(handles) == 2, handles
    assert leaks(run_dir, key, handles) == []
    assert loose_modes(run_dir) == []
    for private in ("keys.log", "emulator-keys.log", "client-keys.log", "capture.pcap", "ca/ca.key",
                    "events.jsonl", "summary.md", "client.log", "client.events.jsonl"):
        path = run_dir / private
        if private == "keys.log" and not case.proxy:
            assert not path.exists()
            continue
        assert path.stat().st_size > 0 and stat.S_IMODE(path.stat().st_mode) == 0o600, private
    # The redaction is where the secrets were, not a run that never met them.
    redacted = f"<redacted len={len(key)} "
    assert redacted in (run_dir / "client.log").read_text()
    # The cassette holds both sessions, the handle as a placeholder both ways.
    cassette = (run_dir / "session.cassette.jsonl").read_text()
    assert cassette.count("<redacted len=36 ") >= 2
    if case.proxy and case.via == "query":
        (start,) = {str(e.fields["path"]) for e in result.events if e.name == "proxy.ws_start"}
        assert "?key=" + redacted in start
