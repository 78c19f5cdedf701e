import pytest

from faultlab.events import Event
from faultlab.expect import Alive, Count, ExitCode, Occurs, RunFacts
from faultlab.protocols import GEMINI, OPENAI

EVENTS = [
    Event(0.4, "client", "client.connected", {"attempt": 1}),
    Event(2.0, "faultlab", "fault.applied", {"step": "cut"}),
    Event(4.4, "client", "client.lost", {}),
    Event(5.0, "capture", "tcp.fin", {"from": "client"}),
]
FACTS = RunFacts(EVENTS, {"client": 1, "target": None}, frozenset({"target"}))


def test_exit_code_compares_the_clients_code() -> None:
    """The client's exit code is checked; a process still running has none."""
    assert ExitCode(exit_code=1).check(FACTS).held
    assert not ExitCode(exit_code=0).check(FACTS).held
    assert ExitCode(exit_code=0, process="target").check(FACTS).seen == "still running at the end"


def test_count_with_field_match() -> None:
    """Counting matches names and field values."""
    assert Count.model_validate({"count": {"event": "tcp.fin", "where": {"from": "client"}},
                                 "equals": 1}).check(FACTS).held
    assert Count.model_validate({"count": {"event": "tcp.fin", "where": {"from": "server"}},
                                 "equals": 0}).check(FACTS).held
    assert not Count.model_validate({"count": {"event": "client.lost"},
                                     "at_least": 2}).check(FACTS).held


def test_a_message_kind_matches_in_either_spelling_and_by_its_parts() -> None:
    """`where: {kind}` in the run's protocol, as a frame trigger reads it: `toolCall` is the
    logged `tool_call`, `serverContent.turnComplete` a message carrying it among other parts, a
    beta OpenAI name its GA one; another kind, or any other field, still has to be equal."""
    gemini = RunFacts([
        Event(1.0, "target", "emulator.frame", {"from": "server", "kind": "tool_call"}),
        Event(2.0, "target", "emulator.frame",
              {"from": "server", "kind": "server_content.generation_complete+turn_complete"}),
    ], protocol=GEMINI)

    def count(kind: str, facts: RunFacts = gemini, **more: str) -> int:
        outcome = Count.model_validate({"count": {"event": "emulator.frame", "where": {
            "kind": kind, **more}}, "at_least": 0}).check(facts)
        return int(outcome.seen)

    assert count("toolCall") == count("tool_call") == 1
    assert count("serverContent.turnComplete") == count("server_content") == 1
    assert count("serverContent.modelTurn") == count("setupComplete") == 0
    assert count("toolCall", **{"from": "client"}) == 0
    occurs = Occurs.model_validate({
        "event": "emulator.frame", "where": {"kind": "serverContent.turnComplete"},
        "after": {"event": "emulator.frame", "where": {"kind": "toolCall"}}, "within": "1.5s"})
    assert occurs.check(gemini).seen == "at +1.000s"
    openai = RunFacts([Event(1.0, "target", "emulator.frame",
                             {"from": "server", "kind": "response.output_audio.delta"})],
                      protocol=OPENAI)
    assert count("response.audio.delta", openai) == count("response.output_audio", openai) == 1
    assert count("response.output_text", openai) == 0


def test_count_needs_a_bound() -> None:
    """A count without equals/at_least/at_most is a profile error."""
    with pytest.raises(ValueError):
        Count.model_validate({"count": {"event": "x"}})


def test_occurs_relative_to_another_event() -> None:
    """A deadline counts from the reference event and honours not_before."""
    after = {"event": "fault.applied", "where": {"step": "cut"}}
    assert Occurs.model_validate({"event": "client.lost", "after": after, "not_before": "2s",
                                  "within": "3.5s"}).check(FACTS).held
    too_early = Occurs.model_validate({"event": "client.lost", "after": after,
                                       "not_before": "2.5s"}).check(FACTS)
    assert not too_early.held and too_early.seen == "at +2.400s"
    missing_ref = Occurs.model_validate({"event": "client.lost",
                                         "after": {"event": "never"}}).check(FACTS)
    assert not missing_ref.held and "never happened" in missing_ref.seen


def test_occurs_from_start() -> None:
    """Without a reference, and with no client start in the events, the deadline counts from 0."""
    assert Occurs.model_validate({"event": "client.connected", "within": "1s"}).check(FACTS).held
    assert not Occurs.model_validate({"event": "client.lost", "within": "1s"}).check(FACTS).held


def test_alive_at_end() -> None:
    """Alive reads the snapshot taken when the run ended."""
    assert Alive(alive="target").check(FACTS).held
    assert not Alive(alive="client").check(FACTS).held


def test_windows_without_a_reference_count_from_the_clients_start() -> None:
    """`within` with no `after` counts from the client's start, not from the run's."""
    started = [Event(1.5, "faultlab", "process.start", {"role": "target"}),
               Event(1.8, "faultlab", "process.start", {"role": "client"}), *EVENTS[1:],
               Event(3.5, "client", "client.connected", {"attempt": 2})]
    facts = RunFacts(started)
    outcome = Occurs.model_validate({"event": "client.connected", "within": "2s"}).check(facts)
    assert outcome.held and outcome.seen == "at +1.700s"
    assert not Occurs.model_validate({"event": "client.connected",
                                      "within": "1.5s"}).check(facts).held


def test_a_faults_effects_count_from_the_start_of_its_application() -> None:
    """`fault.applied` is stamped once the fault is in place: an effect seen while it was being
    applied (a close echoed before the stamp) still comes after it."""
    events = [Event(2.0525, "target", "server.closed", {}),
              Event(2.0526, "faultlab", "fault.applied", {"step": "bye", "applied_in_ms": 3.4})]
    facts = RunFacts(events, {}, frozenset())
    after = {"event": "fault.applied", "where": {"step": "bye"}}
    seen = Occurs.model_validate({"event": "server.closed", "after": after,
                                  "within": "1s"}).check(facts)
    assert seen.held and seen.seen == "at +0.003s"
    late = [Event(2.0, "target", "server.closed", {}), *events[1:]]
    assert not Occurs.model_validate({"event": "server.closed", "after": after}).check(
        RunFacts(late, {}, frozenset())).held


def test_each_verdict_names_the_moment_it_rests_on() -> None:
    """What a report links an expectation to: the first hit, the last counted event, the exit;
    a window that never saw its event points at where the window began."""
    after = {"event": "fault.applied", "where": {"step": "cut"}}
    assert Occurs.model_validate({"event": "client.lost", "after": after}).check(FACTS).at == 4.4
    assert Occurs.model_validate({"event": "client.gone", "after": after}).check(FACTS).at == 2.0
    assert Occurs.model_validate({"event": "client.gone"}).check(FACTS).at is None
    assert Count.model_validate({"count": {"event": "tcp.fin"}, "equals": 1}).check(FACTS).at == 5.0
    exited = RunFacts([*EVENTS, Event(6.0, "faultlab", "process.exit", {"role": "client"})],
                      {"client": 1})
    assert ExitCode(exit_code=1).check(exited).at == 6.0
