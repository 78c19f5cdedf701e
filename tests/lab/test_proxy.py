"""The embedded mitmproxy: transparent interception, TLS from the lab CA, the frame log."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from .helpers import failed, peers, run_profile

pytestmark = pytest.mark.lab


def test_plain_websocket_frames_are_logged_both_ways(runs_dir: Path) -> None:
    """With `proxy: true` every message of a ws:// session becomes a proxy.frame event, and the
    client's clean close reaches the log."""
    text = "name: proxied\nproxy: true\n" + peers("2s") + """\
expect:
  - {exit_code: 0}
  - {event: proxy.ws_start}
  - {count: {event: proxy.frame, where: {from: client}}, at_least: 5}
  - {count: {event: proxy.frame, where: {from: server}}, at_least: 5}
  - {event: proxy.ws_end, where: {code: 1000, closed_by_client: true}}
"""
    result = run_profile(text, runs_dir)
    assert result.exit_code == 0, failed(result) + (result.run_dir / "proxy.log").read_text()


def test_tls_session_to_the_emulator_is_decoded(runs_dir: Path) -> None:
    """An unmodified SDK client trusts the proxy's certificate (lab CA), the proxy verifies the
    emulator's, and the frame log shows the Live API kinds with the handle redacted."""
    client = Path(__file__).with_name("sdk_client.py")
    text = f"""\
name: proxied-live
proxy: true
target: {{emulator: {{time_scale: 0.1}}}}
client:
  command: [{sys.executable}, {client}]
  env: {{GOOGLE_API_KEY: not-a-real-key}}
expect:
  - {{exit_code: 0}}
  - {{event: proxy.frame, where: {{kind: setup, from: client}}}}
  - {{event: proxy.frame, where: {{kind: setup_complete}}}}
  - {{event: proxy.frame, where: {{kind: session_resumption_update}}}}
  - {{event: proxy.frame, where: {{kind: server_content.model_turn}}}}
timeout: 30s
"""
    result = run_profile(text, runs_dir)
    assert result.exit_code == 0, failed(result) + (result.run_dir / "proxy.log").read_text()
    update = next(e for e in result.observed if e.name == "proxy.frame"
                  and e.fields.get("kind") == "session_resumption_update")
    assert str(update.fields["handle"]).startswith("<redacted len=36")
    assert (result.run_dir / "keys.log").stat().st_size > 0
