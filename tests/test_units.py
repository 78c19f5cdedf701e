import pytest

from faultlab.units import parse_duration, parse_duration_range


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


@pytest.mark.parametrize(("text", "low", "high"), [
    ("1.8-1.9s", 1.8, 1.9), ("500ms-2s", 0.5, 2.0), (" 6.1s - 7.1s ", 6.1, 7.1),
    (["1s", "2s"], 1.0, 2.0)])
def test_ranges_of_durations_parse_to_seconds(text: object, low: float, high: float) -> None:
    """A low without a unit takes the high's."""
    assert parse_duration_range(text) == pytest.approx((low, high))


@pytest.mark.parametrize("bad", ["2-1s", "1.8s", "1-2-3s", "1-2", ["1s"], 3])
def test_ranges_the_wrong_way_round_or_without_units_are_refused(bad: object) -> None:
    with pytest.raises(ValueError):
        parse_duration_range(bad)
