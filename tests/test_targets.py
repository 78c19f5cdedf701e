"""Target kinds: what each tells a run (its command line, the client's names, trust and resolver,
the lab's uplink), judged through a stand-in for the launcher, without a lab."""

from __future__ import annotations

from dataclasses import dataclass
from ipaddress import IPv4Address
from pathlib import Path

import pytest

from faultlab.errors import LabError
from faultlab.lab import backend_for
from faultlab.lab import uplink as lab_uplink
from faultlab.profile import load_profile, parse_profile
from faultlab.protocols import GEMINI
from faultlab.targets import TargetKind

SERVER = IPv4Address("198.18.0.6")


@dataclass(frozen=True)
class FakeLab:
    server_address: IPv4Address = SERVER


@dataclass
class FakeCA:
    directory: Path

    @property
    def cert_path(self) -> Path:
        return self.directory / "ca.pem"


@dataclass
class FakeRun:
    """What a kind reads of the launcher (`faultlab.targets.base.Surroundings`)."""

    run_dir: Path
    folder: Path
    speech: Path | None = None
    lab: FakeLab = FakeLab()
    tape: Path | None = None

    @property
    def ca(self) -> FakeCA:
        return FakeCA(self.run_dir / "ca")

    def profile_path(self, path: Path) -> Path:
        return self.folder / path


def kind_of(target: str) -> TargetKind:
    profile = parse_profile(f"name: t\ntarget: {target}\nclient: {{builtin: naive}}\n")
    return profile.target_kind


def test_an_emulator_serves_the_services_names_with_the_runs_ca(tmp_path: Path) -> None:
    """The emulator runs in the lab on the server's address, with the run's CA, the profile's
    utterances (from the profile's folder) and the microphone's clips; the client resolves the
    service's names to it and gets the CA and a base URL that names the port."""
    kind = kind_of("{emulator: {utterances: said, seed: 7}, port: 8443}")
    run = FakeRun(tmp_path, Path("/profiles"), speech=tmp_path / "speech")
    argv = kind.argv(run)
    assert argv[argv.index("--host") + 1:argv.index("--host") + 4] == [str(SERVER), "--port", "8443"]
    assert argv[argv.index("--ca-dir") + 1] == str(tmp_path / "ca")
    assert [argv[i + 1] for i, a in enumerate(argv) if a == "--utterances"] == [
        "/profiles/said", str(tmp_path / "speech")]
    assert (kind.in_lab, kind.frame_log, kind.uplink) == (True, "emulator.connect", None)
    assert kind.address(FakeLab()) == str(SERVER) and kind.client_names() == list(GEMINI.service.hosts)
    env = kind.client_env(run, proxied=False)
    assert env["SSL_CERT_FILE"] == str(tmp_path / "ca" / "ca.pem")
    assert env["GOOGLE_GEMINI_BASE_URL"] == f"https://{GEMINI.service.endpoint}:8443"
    assert kind.upstream_ca(run) == tmp_path / "ca" / "ca.pem"
    assert "SSLKEYLOGFILE" in kind.env(run)


def test_the_emulator_on_the_services_port_gives_a_plain_base_url(tmp_path: Path) -> None:
    kind = kind_of("{emulator: {}}")
    assert kind.listen_port == 443
    env = kind.client_env(FakeRun(tmp_path, tmp_path), proxied=True)
    assert env["GOOGLE_VERTEX_BASE_URL"] == f"https://{GEMINI.service.endpoint}"


def test_a_cassette_is_served_where_the_emulator_would_be(tmp_path: Path) -> None:
    """A cassette target runs `emulator serve --cassette` with its file (from the profile's
    folder), speaks the cassette's API, writes the emulator's frame log and records itself."""
    from faultlab.cassette.format import Cassette, write_cassette

    write_cassette(tmp_path / "o.cassette.jsonl", Cassette("openai", "test", []))
    (tmp_path / "p.yaml").write_text(
        "name: p\ntarget: {cassette: {file: o.cassette.jsonl, divergence: fallback, "
        "time_scale: 0.5}}\nclient: {builtin: openai-naive}\n")
    kind = load_profile(tmp_path / "p.yaml").target_kind
    assert kind is not None and kind.name == "cassette" and kind.protocol.name == "openai"
    run = FakeRun(tmp_path, tmp_path, tape=tmp_path / "target.tape.jsonl")
    argv = kind.argv(run)
    assert argv[argv.index("--cassette") + 1] == str(tmp_path / "o.cassette.jsonl")
    assert argv[argv.index("--divergence") + 1] == "fallback"
    assert argv[argv.index("--time-scale") + 1] == "0.5"
    assert argv[argv.index("--record") + 1] == str(tmp_path / "target.tape.jsonl")
    assert (kind.frame_log, kind.records, kind.listen_port) == ("emulator.connect", True, 443)
    assert kind.client_env(run, proxied=False)["OPENAI_BASE_URL"].startswith("https://")


def test_a_program_target_runs_in_the_lab_and_needs_nothing_of_the_client(tmp_path: Path) -> None:
    kind = kind_of("{builtin: ws-echo-server, port: 8765, args: [-v]}")
    run = FakeRun(tmp_path, tmp_path)
    assert kind.argv(run)[-1] == "-v" and kind.listen_port == 8765
    assert (kind.in_lab, kind.frame_log, kind.uplink, kind.resolver()) == (True, None, None, None)
    assert kind.client_names() == [] and kind.client_env(run, proxied=True) == {}
    assert kind.upstream_ca(run) is None and kind.address(FakeLab()) == str(SERVER)


def test_a_profile_without_a_target_has_the_kind_that_brings_nothing(tmp_path: Path) -> None:
    """No target is a kind of its own: it runs nothing, counts no connections, gives the
    programs no port, names, trust or name server, and speaks the default protocol."""
    kind = parse_profile("name: t\nclient: {builtin: naive}\n").target_kind
    run = FakeRun(tmp_path, tmp_path)
    assert (kind.name, kind.in_lab, kind.protocol, kind.records) == ("none", False, GEMINI, False)
    table = kind.connections(str(SERVER))
    assert kind.target_env(str(SERVER)) == {} and (table.port, table.address) == (None, None)
    assert kind.client_names() == kind.dns_names() == [] and kind.client_env(run, True) == {}
    assert (kind.resolver(), kind.upstream_ca(run), kind.uplink) == (None, None, None)
    assert kind.host(FakeLab()) == kind.address(FakeLab()) == str(SERVER)
    with pytest.raises(LabError, match="a none target runs nothing"):
        kind.argv(run)


def test_a_remote_pinned_to_host_loopback_reaches_this_machine_through_the_uplink() -> None:
    kind = kind_of("{remote: {host: live.test, port: 8443, address: host-loopback}}")
    assert not kind.in_lab and kind.listen_port == 8443
    assert kind.address(FakeLab()) == str(lab_uplink.HOST_LOOPBACK)
    assert kind.uplink == lab_uplink.UplinkSpec(host_loopback=True)
    assert kind.client_names() == ["live.test"] and kind.host(FakeLab()) == "live.test"
    assert kind.resolver() == lab_uplink.DNS


def test_a_remote_without_an_address_is_asked_of_dns(tmp_path: Path) -> None:
    kind = kind_of("{remote: {host: live.test}}")
    assert kind.address(FakeLab()) is None and kind.client_names() == []
    assert kind.uplink == lab_uplink.UplinkSpec(host_loopback=False)
    assert kind.client_env(FakeRun(tmp_path, tmp_path), proxied=False) == {}
    with pytest.raises(LabError, match="runs nothing in the lab"):
        kind.argv(FakeRun(tmp_path, tmp_path))


def test_a_member_with_an_image_needs_the_backend_that_runs_containers() -> None:
    assert (backend_for(images=True), backend_for(images=False)) == ("docker", "netns")
