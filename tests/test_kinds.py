import pytest

from faultlab.kinds import kind_matches


@pytest.mark.parametrize(("actual", "wanted", "hit"), [
    ("tool_call", "toolCall", True),
    ("tool_call", "tool_call", True),
    ("realtime_input.audio", "realtimeInput", True),
    ("server_content.generation_complete+turn_complete", "serverContent.turnComplete", True),
    ("server_content.model_turn", "serverContent.turnComplete", False),
    ("setup_complete", "setup", False),
])
def test_kinds_match_in_either_spelling(actual: str, wanted: str, hit: bool) -> None:
    """Kinds are compared in snake_case; a serverContent flag matches messages carrying it."""
    assert kind_matches(actual, wanted) is hit
