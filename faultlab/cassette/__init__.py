"""Cassettes: a realtime session recorded once (from a run or a capture) and its server side
replayed offline, under any fault (docs/cassettes.md)."""
