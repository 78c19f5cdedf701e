import pytest
from pydantic import TypeAdapter, ValidationError

from faultlab.connections import ConnectionChoice, choose


def test_choose_first_latest_and_k() -> None:
    """`first`, `latest` and k (1-based) pick from connections in the order seen; none when absent."""
    seen = ["a", "b", "c"]
    assert [choose(seen, w) for w in ("first", "latest", 1, 2, 3, 4)] == ["a", "c", "a", "b", "c", None]
    assert choose([], "first") is None and choose([], "latest") is None


@pytest.mark.parametrize("bad", [0, -1, True, "2", "last"])
def test_a_connection_is_first_latest_or_a_number_from_one(bad: object) -> None:
    """Connections count from 1: 0, negatives, booleans and other words are refused."""
    with pytest.raises(ValidationError):
        TypeAdapter(ConnectionChoice).validate_python(bad)
