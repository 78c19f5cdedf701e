import pytest

from faultlab.units import parse_duration


@pytest.mark.parametrize(("text", "seconds"), [
    ("1.5s", 1.5), ("200ms", 0.2), ("2m", 120.0), ("1h", 3600.0), (".5s", 0.5), (" 3 s ", 3.0),
])
def test_durations_with_units_parse_to_seconds(text: str, seconds: float) -> None:
    """Durations carry their unit and come out in seconds."""
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("bad", [1.5, 2, "2", "1.5 sec", "-1s", "", None, True, "9" * 400 + "s",
                                 "8761h"])
def test_bare_numbers_and_unknown_units_are_refused(bad: object) -> None:
    """A number without a unit is ambiguous, so it is an error."""
    with pytest.raises(ValueError):
        parse_duration(bad)
