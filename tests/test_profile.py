from pathlib import Path

import pytest

from faultlab.catalogue import profile_paths
from faultlab.errors import ProfileError
from faultlab.faults.drop import DropParams
from faultlab.profile import load_profile, parse_profile
from faultlab.protocols import GEMINI, OPENAI

from .conftest import PROFILES

GOOD = """\
name: demo
target: {builtin: ws-echo-server, port: 8765}
client:
  builtin: ws-client
  args: [--duration, 5s]
hosts: [echo.test]
network:
  sysctl: {server: {net.ipv4.tcp_retries2: 5}}
timeline:
  - id: cut
    when: {at: 1.5s}
    do: {fault: drop, direction: to_client, connection: latest}
  - when: {step: cut}
    after: 300ms
    do: {fault: restore, faults: [cut]}
expect:
  - {exit_code: 0}
  - {count: {event: client.lost}, equals: 0}
timeout: 20s
"""


def problems(text: str) -> list[str]:
    with pytest.raises(ProfileError) as info:
        parse_profile(text, "p.yaml")
    return info.value.problems


def test_a_good_profile_validates_into_models() -> None:
    """Durations become seconds, faults get their own parameter models, steps get ids."""
    p = parse_profile(GOOD, "p.yaml")
    assert p.timeout == 20.0
    cut, restore = p.timeline
    assert cut.when.at == 1.5 and isinstance(cut.params, DropParams)
    assert cut.params.direction == "to_client" and cut.params.connection == "latest"
    assert restore.id == "step2" and restore.after == pytest.approx(0.3)
    assert p.network.sysctl["server"]["net.ipv4.tcp_retries2"] == 5
    assert len(p.expect) == 2


def test_unknown_field_names_file_line_and_path() -> None:
    """A misspelt field is reported at its own line with its dotted path."""
    text = GOOD.replace("    after: 300ms\n", "    after: 300ms\n    colour: red\n")
    assert problems(text) == ["p.yaml:15: timeline[1].colour: unknown field"]


def test_a_key_that_is_no_plain_name_is_quoted_and_the_problem_stays_one_line() -> None:
    """A mangled file's key (a newline, a dot, a space in it) is quoted in the path."""
    text = GOOD.replace("{count: {event: client.lost}", '{count: {event: client.lost, "odd\\n.": 1}')
    assert problems(text) == ['p.yaml:18: expect[1].count["odd\\n."]: unknown field']
    text = GOOD.replace("{count: {event: client.lost}", '{count: {event: client.lost, "a[b]": 1}')
    assert problems(text) == ['p.yaml:18: expect[1].count["a[b]"]: unknown field']


def test_a_union_member_pydantic_tried_is_no_part_of_the_path() -> None:
    """pydantic names each member of a union it tried (`list[str]`, `str`) in an error's path:
    the path is the input's, to the item at fault."""
    text = GOOD.replace("  - {exit_code: 0}\n", "  - {exit_code: 0}\n  - {candidate: [relay/tcp, 5]}\n")
    assert problems(text) == [
        "p.yaml:18: expect[1].candidate: Input should be a valid string",
        "p.yaml:18: expect[1].candidate[1]: Input should be a valid string"]
    # A key YAML reads as a number or a boolean is named as pydantic read it (as JSON).
    text = GOOD.replace("{count: {event: client.lost}", "{count: {event: client.lost, 2: x}")
    assert problems(text) == ["p.yaml:18: expect[1].count.2: unknown field"]
    text = GOOD.replace("{count: {event: client.lost}", "{count: {event: client.lost, on: y}")
    assert problems(text) == ["p.yaml:18: expect[1].count.true: unknown field"]
    text = GOOD.replace("  - {exit_code: 0}\n", "  - {exit_code: 0}\n  - {candidate: 5}\n")
    assert problems(text) == ["p.yaml:18: expect[1].candidate: Input should be a valid string",
                              "p.yaml:18: expect[1].candidate: Input should be a valid array"]


def test_a_target_may_not_listen_on_the_turn_servers_ports() -> None:
    """The lab's TURN server listens on the server's address too: 3478, and 5349 with TLS."""
    text = GOOD.replace("port: 8765", "port: 3478") + "turn: {udp: false, tls: false}\n"
    assert problems(text) == ["p.yaml:2: target.port: 3478 is the lab's TURN server's port (the "
                              "profile's 'turn'): give the target another one"]
    parse_profile(GOOD.replace("port: 8765", "port: 5349") + "turn: {tls: false}\n", "p.yaml")
    # A TURN server on UDP only leaves TCP's 3478 to the target.
    parse_profile(GOOD.replace("port: 8765", "port: 3478") + "turn: {tcp: false, tls: false}\n",
                  "p.yaml")
    assert problems(GOOD.replace("port: 8765", "port: 5349") + "turn: {}\n")


def test_bad_fault_parameter_is_reported_inside_do() -> None:
    """A fault's own model validates its parameters, and the error points into `do`."""
    text = GOOD.replace("direction: to_client", "direction: sideways")
    (line,) = problems(text)
    assert line.startswith("p.yaml:12: timeline[0].do.direction: Input should be")


def test_unknown_fault_lists_the_known_ones() -> None:
    """Naming a fault that does not exist says which ones do."""
    (line,) = problems(GOOD.replace("fault: drop", "fault: explode"))
    assert "timeline[0].do.fault: unknown fault 'explode'" in line and "drop" in line


def test_durations_need_units() -> None:
    """A bare number where a duration goes is an error naming the field."""
    (line,) = problems(GOOD.replace("timeout: 20s", "timeout: 20"))
    assert line.startswith("p.yaml:19: timeout: a duration needs a unit")


def test_every_problem_is_reported_at_once() -> None:
    """validate lists all problems of a file, sorted by line."""
    text = (GOOD.replace("name: demo", "name: demo\nbogus: 1")
            .replace("at: 1.5s", "at: soon")
            .replace("{exit_code: 0}", "{exit_code: zero}"))
    lines = problems(text)
    assert [ln.split(":")[1] for ln in lines] == sorted(
        (ln.split(":")[1] for ln in lines), key=int)
    assert any("bogus: unknown field" in ln for ln in lines)
    assert any("timeline[0].when.at" in ln for ln in lines)
    assert any("expect[0].exit_code" in ln for ln in lines)


def test_step_references_must_exist() -> None:
    """`when: {step: X}` and restore's `faults` must name existing steps."""
    lines = problems(GOOD.replace("when: {step: cut}", "when: {step: nope}")
                     .replace("faults: [cut]", "faults: [gone]"))
    assert any("timeline[1].when.step: no step has the id 'nope'" in ln for ln in lines)
    assert any("timeline[1].do: no step has the id 'gone'" in ln for ln in lines)


def test_trigger_needs_exactly_one_kind() -> None:
    """A trigger is at a time, after a step, on an event, or on a connection: one of them."""
    (line,) = problems(GOOD.replace("when: {at: 1.5s}", "when: {at: 1s, connection: 2}"))
    assert "timeline[0].when: give exactly one of" in line


def test_program_needs_command_or_builtin() -> None:
    """The client is a command or a builtin, not both or neither."""
    (line,) = problems(GOOD.replace("  builtin: ws-client\n", "  command: [sh]\n  builtin: ws-client\n"))
    assert "client: give exactly one of 'command' or 'builtin'" in line


def test_duplicate_keys_are_errors() -> None:
    """YAML silently keeps the last duplicate key; a profile does not."""
    lines = problems(GOOD.replace("timeout: 20s", "timeout: 20s\ntimeout: 30s"))
    assert "p.yaml:20: timeout: duplicate key" in lines


def test_yaml_syntax_error_has_a_line() -> None:
    """Broken YAML is reported with its line, not a traceback."""
    (line,) = problems("name: x\nclient: [unclosed\n")
    assert line.startswith("p.yaml:3: (profile): YAML:")


def test_non_mapping_profile() -> None:
    """A profile must be a mapping."""
    assert problems("- just\n- a list\n") == [
        "p.yaml:1: (profile): a profile is a YAML mapping with at least 'name' and 'client'"]


def test_unreadable_file(tmp_path: Path) -> None:
    """A missing file is a profile error, not a crash."""
    with pytest.raises(ProfileError, match="cannot read"):
        load_profile(tmp_path / "missing.yaml")


def test_shipped_profiles_validate() -> None:
    """Every profile in profiles/ is valid."""
    paths = profile_paths([PROFILES])
    assert len(paths) >= 4
    for path in paths:
        name = load_profile(path).name
        assert name in (path.stem, f"{path.parent.name}-{path.stem}")


def test_emulator_target_defaults_and_checks() -> None:
    """An emulator target listens on 443 by default; its personality and overrides are checked;
    other targets need a port."""
    p = parse_profile("name: e\ntarget: {emulator: {time_scale: 0.1}}\nclient: {command: [a]}\n")
    assert p.target is not None and p.target.listen_port == 443
    (line,) = problems("name: e\ntarget: {emulator: {personality: nope}}\nclient: {command: [a]}\n")
    assert "target.emulator.personality: unknown personality 'nope'" in line
    (line,) = problems("name: e\ntarget:\n  emulator: {overrides: {bogus: 1}}\n"
                       "client: {command: [a]}\n")
    assert line.startswith("p.yaml:3: target.emulator: overrides.bogus: unknown field")
    (line,) = problems("name: e\ntarget: {builtin: ws-echo-server}\nclient: {command: [a]}\n")
    assert "target: 'port' is required" in line


def test_frame_triggers_before_or_by_content_need_an_app_fault() -> None:
    """`forward: before` and content matches are the proxy's: a packet fault cannot use them."""
    text = ("name: f\nclient: {command: [a]}\ntarget: {emulator: {}}\n"
            "timeline:\n  - when: {frame: {kind: toolCall, forward: before}}\n"
            "    do: {fault: drop}\n")
    (line,) = problems(text)
    assert "timeline[0].when.frame: 'forward: before'" in line
    ok = parse_profile(text.replace("fault: drop", "fault: freeze"))
    assert ok.timeline[0].when.frame is not None and ok.timeline[0].when.frame.forward == "before"
    (bad,) = problems(text.replace("forward: before", "regex: {tool_call.id: '('}").replace(
        "fault: drop", "fault: freeze"))
    assert "bad regular expression" in bad


def test_a_frame_trigger_needs_a_frame_log() -> None:
    """A packet fault on a frame needs the proxy's or an emulator's frame log to follow."""
    text = ("name: f\nclient: {command: [a]}\ntarget: {builtin: ws-echo-server, port: 1}\n"
            "timeline:\n  - when: {frame: {kind: toolCall}}\n    do: {fault: drop}\n")
    (line,) = problems(text)
    assert line.startswith("p.yaml:5: timeline[0].when.frame: a frame trigger follows the proxy")
    assert parse_profile(text.replace("timeline:", "proxy: true\ntimeline:")).timeline
    assert parse_profile(text.replace("{builtin: ws-echo-server, port: 1}", "{emulator: {}}"))


def test_an_app_fault_needs_a_target_for_its_proxy() -> None:
    """A fault that lives in the proxy needs a target for the proxy to stand in front of."""
    (line,) = problems("name: x\nclient: {command: [a]}\ntimeline:\n"
                       "  - {when: {at: 1s}, do: {fault: freeze}}\n")
    assert line == ("p.yaml:4: timeline[0].do.fault: freeze needs the proxy, which stands in "
                    "front of a target: give the profile a 'target'")


def test_a_client_side_fault_needs_the_microphone() -> None:
    """mic_stall without a `mic` is a profile error at the step's line."""
    text = ("name: x\nclient: {builtin: naive}\ntimeline:\n"
            "  - {when: {at: 1s}, do: {fault: mic_stall, for: 1s}}\n")
    with pytest.raises(ProfileError) as err:
        parse_profile(text, "p.yaml")
    assert err.value.problems == [
        "p.yaml:4: timeline[0].do.fault: mic_stall acts on the lab's microphone: give the "
        "profile a 'mic'"]


def test_a_proxy_needs_a_target() -> None:
    """`proxy: true` without a target is a profile error, not a failure of the run."""
    (line,) = problems("name: x\nclient: {command: [a]}\nproxy: true\n")
    assert line == ("p.yaml:3: proxy: the proxy stands in front of a target: give the profile a "
                    "'target'")


def test_forward_before_cannot_wait() -> None:
    """A step that acts before the message is relayed cannot also wait `after` it."""
    (line,) = problems("name: f\nclient: {command: [a]}\ntarget: {emulator: {}}\ntimeline:\n"
                       "  - when: {frame: {kind: toolCall, forward: before}}\n"
                       "    after: 1s\n    do: {fault: freeze}\n")
    assert line.startswith("p.yaml:6: timeline[0].after: 'forward: before' acts on the message")


def test_an_image_makes_a_docker_lab() -> None:
    """A member with an image runs in the docker lab; a builtin then runs with the image's
    Python, and an image with no command keeps its own (args become its CMD)."""
    profile = parse_profile("name: x\nclient: {image: my-agent:dev, builtin: naive}\n")
    assert (profile.backend, profile.client.image) == ("docker", "my-agent:dev")
    assert profile.client.argv(Path()) == ["python3", "-m", "faultlab.clients.naive"]
    own = parse_profile("name: x\nclient: {image: registry.local:5000/team/agent:1.2, args: [-v]}\n")
    assert (own.backend, own.client.argv(Path())) == ("docker", ["-v"])
    assert parse_profile("name: x\nclient: {builtin: naive}\n").backend == "netns"


@pytest.mark.parametrize(("text", "where", "message"), [
    ("client: {image: My Agent}", "3: client.image", "not an image reference"),
    ("client: {}", "3: client", "or an 'image' with a command of its own"),
    ("network: {backend: netns}\nclient: {image: agent}", "3: network.backend",
     "runs in a container"),
    ("network: {backend: docker}\nclient: {builtin: naive}", "3: network.backend",
     "give the client (or the target) an 'image'"),
    ("client: {builtin: naive}\ntarget: {emulator: {}, image: agent}", "4: target",
     "takes no 'image'"),
])
def test_image_mistakes_are_pinned(text: str, where: str, message: str) -> None:
    with pytest.raises(ProfileError) as caught:
        parse_profile("name: x\n\n" + text + "\n", "p.yaml")
    assert any(where in line and message in line for line in caught.value.problems), \
        caught.value.problems


def test_client_image_override_keeps_the_profile() -> None:
    """`run --client-image` runs the same client, expectations and timeline in a container."""
    from faultlab.profile import with_client_image

    profile = load_profile(PROFILES / "silent-loss.yaml")
    boxed = with_client_image(profile, "faultlab-clients")
    assert (boxed.backend, boxed.client.image) == ("docker", "faultlab-clients")
    assert (boxed.client.setting, boxed.expect, boxed.timeline) == (
        profile.client.setting, profile.expect, profile.timeline)
    with pytest.raises(ValueError, match="not an image reference"):
        with_client_image(profile, "Bad Name")


def test_a_remote_target_is_a_service_outside_the_lab() -> None:
    """A remote target names a host and port (443 by default), optionally pinned to an address
    or to this machine's loopback, and runs nothing in the lab."""
    p = parse_profile("name: r\ntarget: {remote: {host: generativelanguage.googleapis.com}}\n"
                      "client: {builtin: naive, pass_env: [GOOGLE_API_KEY]}\n")
    assert p.remote is not None and p.remote.port == 443 and p.remote.address is None
    assert p.target is not None and p.target.listen_port == 443
    assert p.client.pass_env == ["GOOGLE_API_KEY"]
    pinned = parse_profile("name: r\ntarget: {remote: {host: live.test, port: 8443, "
                           "address: host-loopback}}\nclient: {builtin: naive}\n")
    assert pinned.remote is not None and pinned.remote.address == "host-loopback"
    assert p.protocol is GEMINI and pinned.protocol is GEMINI


def test_a_remote_target_names_the_api_it_speaks() -> None:
    """`protocol` names the realtime API of a remote target, and so the run's."""
    p = parse_profile("name: r\ntarget: {remote: {host: api.openai.com, protocol: openai}}\n"
                      "client: {command: [./agent]}\n")
    assert p.protocol is OPENAI


@pytest.mark.parametrize(("target", "message"), [
    ("{remote: {host: 'a b'}}", "target.remote.host: 'a b' is not a host name"),
    ("{remote: {host: h, address: 127.0.0.1}}", "a service on this machine's is 'host-loopback'"),
    ("{remote: {host: h, address: nowhere}}", "an IPv4 address, or 'host-loopback'"),
    ("{remote: {host: h}, port: 443}", "its port goes in 'remote', and it takes no 'port'"),
    ("{remote: {host: h}, builtin: ws-echo-server}", "give exactly one of"),
    ("{remote: {host: h, protocol: grpc}}", "target.remote.protocol: 'grpc': one of gemini, openai"),
])
def test_a_remote_target_is_checked(target: str, message: str) -> None:
    with pytest.raises(ProfileError) as info:
        parse_profile(f"name: r\ntarget: {target}\nclient: {{builtin: naive}}\n", "p.yaml")
    assert message in str(info.value)


def test_hosts_need_a_remote_targets_address() -> None:
    """Without a pinned address the client asks DNS: names in `hosts` would map to nothing."""
    with pytest.raises(ProfileError) as info:
        parse_profile("name: r\ntarget: {remote: {host: h}}\nclient: {builtin: naive}\n"
                      "hosts: [other.test]\n", "p.yaml")
    assert "p.yaml:4: hosts: the names in 'hosts' resolve to the target's address" in str(info.value)


def test_the_real_service_example_validates() -> None:
    """docs/real's profiles parse, and take the key from faultlab's environment."""
    paths = sorted((PROFILES.parent / "docs" / "real").glob("*.yaml"))
    assert paths
    for path in paths:
        profile = load_profile(path)
        assert profile.remote is not None and "GOOGLE_API_KEY" in profile.client.pass_env
        assert "GOOGLE_API_KEY" not in profile.client.env  # never written in the profile


def test_the_field_study_s_ranges_are_read_by_column() -> None:
    """`field` states the measured ranges per suite column; a wrong one is an error at its line."""
    p = parse_profile("name: x\nclient: {command: [x]}\nfield: {recovered: 6.1-7.1s}\n", "p.yaml")
    assert p.field_ranges.ranges() == {"recovered": (6.1, 7.1)}
    assert problems("name: x\nclient: {command: [x]}\nfield:\n  detected: 1-2s\n"
                    "  recoverd: 1-2s\n") == ["p.yaml:5: field.recoverd: unknown field"]
    line, = problems("name: x\nclient: {command: [x]}\nfield: {resumed: 3-2s}\n")
    assert line.startswith("p.yaml:3: field.resumed:") and "low end is above" in line


def test_a_turn_server_listens_on_some_transport() -> None:
    """`turn` takes its transports, all three by default; none at all is said at its line."""
    text = "name: t\nclient: {builtin: naive}\nturn: {}\n"
    turn = parse_profile(text, "p.yaml").turn
    assert turn is not None and (turn.udp, turn.tcp, turn.tls) == (True, True, True)
    assert parse_profile(text.replace("{}", "{tls: false}"), "p.yaml").turn.tls is False
    with pytest.raises(ProfileError) as info:
        parse_profile(text.replace("{}", "{udp: false, tcp: false, tls: false}"), "p.yaml")
    assert "p.yaml:3: turn: a TURN server needs at least one of udp, tcp and tls" in str(info.value)
