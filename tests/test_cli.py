import json
import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from faultlab.faults import FAULTS

from .conftest import PROFILES, faultlab
from .test_pcap import conversation


def test_validate_reports_file_line_field_and_exits_2(tmp_path: Path) -> None:
    """A broken profile gives `file:line: field: message`, exit 2 and no traceback."""
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\nclient: {builtin: ws-client}\ntimeout: 5\n"
                   "timeline:\n  - when: {at: 1s}\n    do: {fault: drop, direction: up}\n")
    done = faultlab("validate", str(bad))
    assert done.returncode == 2
    assert f"{bad}:3: timeout: a duration needs a unit" in done.stderr
    assert f"{bad}:6: timeline[0].do.direction: Input should be" in done.stderr
    assert "Traceback" not in done.stderr


def test_validate_accepts_the_shipped_profiles() -> None:
    """Every shipped profile validates: all of them are read, none is refused."""
    shipped = [p for p in PROFILES.rglob("*") if p.suffix in (".yaml", ".yml")]
    assert shipped
    done = faultlab("validate", "profiles")
    assert done.returncode == 0, done.stderr
    assert f"{len(shipped)} profile(s) valid" in done.stdout


def test_run_with_a_broken_profile_exits_2_before_any_lab(tmp_path: Path) -> None:
    """`run` validates first: a usage error never builds a lab."""
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\n")
    done = faultlab("run", "--runs-dir", str(tmp_path / "runs"), str(bad))
    assert done.returncode == 2
    assert f"{bad}:1: client: required field is missing" in done.stderr
    assert not (tmp_path / "runs").exists()


def test_pcap_inspect_json(tmp_path: Path) -> None:
    """`pcap inspect --json` prints the flow report."""
    path = tmp_path / "c.pcap"
    conversation(path)
    done = faultlab("pcap", "inspect", "--json", str(path))
    assert done.returncode == 0, done.stderr
    (flow,) = json.loads(done.stdout)["flows"]
    assert flow["server_to_client"]["rst"] == 1
    assert flow["websocket_frames"][-1]["close_code"] == 1001


def test_pcap_inspect_rejects_a_non_pcap(tmp_path: Path) -> None:
    """A file that is not a pcap gives one line and exit 2."""
    path = tmp_path / "x.pcap"
    path.write_bytes(b"definitely not a capture file")
    done = faultlab("pcap", "inspect", str(path))
    assert done.returncode == 2 and "not a pcap file" in done.stderr
    assert "Traceback" not in done.stderr


def test_doctor_names_every_mechanism() -> None:
    """doctor lists the mechanisms with a verdict each, and the fix under each that is not ok;
    then every fault with its layer and mechanism."""
    done = faultlab("doctor")
    lines, _, faults = done.stdout.partition("\nfaults (name, layer, mechanism):\n")
    lines = lines.splitlines()
    verdicts = {line.split()[1]: line.split()[0] for line in lines if not line.startswith(" ")}
    assert set(verdicts) >= {"python", "privileges", "iptables-restore", "tcpdump", "pyroute2",
                             "mitmproxy", "espeak-ng", "coturn", "slirp4netns", "impairments",
                             "docker"}
    assert set(verdicts.values()) <= {"ok", "warn", "FAIL"}
    for line, after in zip(lines, [*lines[1:], ""], strict=True):
        if line.startswith(("warn", "FAIL")):
            assert after.split()[0] == "fix:", f"no fix under {line!r}"
    listed = {line.split()[0]: line.split(None, 2)[1:] for line in faults.splitlines()}
    assert listed == {name: [cls.layer, cls.mechanism] for name, cls in FAULTS.items()}
    assert all(cls.mechanism for cls in FAULTS.values())


# shutil.which itself, for doctor_without to hide programs from.
WHICH = shutil.which


def doctor_without(monkeypatch: pytest.MonkeyPatch, *missing: str) -> Result:
    """`faultlab doctor` (in this process) on this machine as it would be without the programs
    `missing`; the probes that build a namespace or ask the Docker engine answer ok unasked."""
    from faultlab import doctor
    from faultlab.cli import cli

    monkeypatch.setattr(shutil, "which", lambda name, *args, **kwargs:
                        None if name in missing else WHICH(name, *args, **kwargs))
    for probe in ("impairments", "containers"):
        monkeypatch.setattr(doctor, probe, lambda name=probe: doctor.Check(name, True, "not probed",
                                                                           optional=True))
    return CliRunner().invoke(cli, ["doctor"])


def test_doctor_fails_on_a_missing_tool_with_its_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without tcpdump, which every capture needs, doctor says FAIL and how to install it, and
    exits 1."""
    result = doctor_without(monkeypatch, "tcpdump")
    assert result.exit_code == 1
    assert re.search(r"^FAIL tcpdump +missing\n +fix: apt-get install tcpdump$", result.output,
                     re.M), result.output


def test_doctor_warns_of_a_missing_extra_without_failing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without espeak-ng, which only the emulator's speech needs, doctor warns with the fix, and
    its exit code is what it would be with espeak-ng."""
    result = doctor_without(monkeypatch, "espeak-ng")
    assert re.search(r"^warn espeak-ng +missing: the emulator speaks a tone\n +fix: apt-get "
                     r"install espeak-ng$", result.output, re.M), result.output
    assert result.exit_code == doctor_without(monkeypatch).exit_code


def test_doctor_warns_of_a_missing_turn_server_without_failing(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Without coturn, which only a profile with `turn` needs, doctor warns with the fix."""
    result = doctor_without(monkeypatch, "turnserver")
    assert re.search(r"^warn coturn +missing: a profile with 'turn' cannot run\n +fix: apt-get "
                     r"install coturn$", result.output, re.M), result.output
    assert result.exit_code == doctor_without(monkeypatch).exit_code


def test_the_host_resolvers_are_read_for_the_uplinks_dns(tmp_path: Path) -> None:
    """doctor reads the host's nameservers (skipping comments, options and zone ids), to warn
    when all are on its loopback, where the uplink's DNS cannot reach them."""
    from faultlab.doctor import host_resolvers

    conf = tmp_path / "resolv.conf"
    conf.write_text("# stub\nnameserver 127.0.0.53\noptions edns0\nnameserver fe80::1%eth0\n"
                    "nameserver not-an-ip\n")
    assert host_resolvers(conf) == ["127.0.0.53", "fe80::1"]
    assert host_resolvers(tmp_path / "missing") == []
