import pytest
from pydantic import TypeAdapter, ValidationError

from faultlab.connections import ConnectionChoice, ConnectionTable, choose


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


def test_only_connections_toward_the_target_are_numbered() -> None:
    """A client's other connections (a token fetch, telemetry through a remote target's uplink)
    get no number: only SYNs to the target's port, and its address when known."""
    table = ConnectionTable(443, "10.0.2.2")
    assert table.observe_syn("198.18.0.2", 40001, "10.0.2.2", 8080, 0.0) is None
    assert table.observe_syn("198.18.0.2", 40002, "203.0.113.9", 443, 0.1) is None
    first = table.observe_syn("198.18.0.2", 40003, "10.0.2.2", 443, 0.2)
    assert first is not None and first.k == 1
    by_dns = ConnectionTable(443)  # a remote resolved by DNS: any address, the target's port
    conn = by_dns.observe_syn("198.18.0.2", 40004, "203.0.113.9", 443, 0.3)
    assert conn is not None and conn.server == "203.0.113.9"
