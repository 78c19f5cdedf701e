"""The lab resolver's core, without sockets or a clock: a query's bytes in, what to do with it
out (answer these bytes, now or after a delay; answer nothing; ask the upstream).

DNS messages are read and written by hand (RFC 1035 section 4): a stub resolver's query is one
question, and an answer is that question echoed with at most one A record, so this is shorter
than scapy's DNS layer and starts 0.8 s sooner (the resolver is started before the client). The
tests check every answer with scapy's parser.
"""

from __future__ import annotations

import ipaddress
import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal

# What a `dns` fault makes the resolver answer for its names.
Answer = Literal["nxdomain", "servfail", "none", "slow"]
ANSWERS: tuple[Answer, ...] = ("nxdomain", "servfail", "none", "slow")

HEADER = struct.Struct("!HHHHHH")
QR, AA, RD, RA = 0x8000, 0x0400, 0x0100, 0x0080
OPCODE = 0x7800
NOERROR, FORMERR, SERVFAIL, NXDOMAIN, NOTIMP, REFUSED = 0, 1, 2, 3, 4, 5
TYPE_A, CLASS_IN = 1, 1
# An answer is never kept: once the fault is reverted, the next lookup meets the normal answer.
# (An NXDOMAIN without an SOA record is not cached either, RFC 2308 section 5.)
TTL_S = 0


@dataclass(frozen=True)
class Query:
    """A query's header fields and its one question, the name lowercased without the root dot."""

    id: int
    flags: int
    name: str
    qtype: int
    qclass: int
    question: bytes  # the question section as received, echoed in the answer

    @property
    def opcode(self) -> int:
        return (self.flags & OPCODE) >> 11


def parse_query(data: bytes) -> Query | None:
    """The query in `data`, or None for what is not a query with one readable question (a
    response, a truncated or malformed message: dropped, as a server does with garbage)."""
    if len(data) < HEADER.size:
        return None
    qid, flags, qdcount, _, _, _ = HEADER.unpack_from(data)
    if flags & QR or qdcount != 1:
        return None
    labels: list[str] = []
    at = HEADER.size
    while True:
        if at >= len(data):
            return None
        length = data[at]
        at += 1
        if length == 0:
            break
        if length > 63 or at + length > len(data):  # a pointer in a question is not a query's
            return None
        labels.append(data[at:at + length].decode("ascii", "replace").lower())
        at += length
    if at + 4 > len(data):
        return None
    qtype, qclass = struct.unpack_from("!HH", data, at)
    return Query(qid, flags, ".".join(labels), qtype, qclass, data[HEADER.size:at + 4])


def build_answer(query: Query, rcode: int, address: str | None = None) -> bytes:
    """The response to `query`: its question echoed, `rcode`, and an A record for `address`."""
    flags = QR | (query.flags & (OPCODE | RD)) | AA | RA | rcode
    record = b""
    if address is not None:
        # The name is the question's (a pointer to offset 12), then type, class, TTL, the address.
        record = struct.pack("!HHHIH", 0xC00C, TYPE_A, CLASS_IN, TTL_S, 4)
        record += ipaddress.IPv4Address(address).packed
    header = HEADER.pack(query.id, flags, 1, 1 if record else 0, 0, 0)
    return header + query.question + record


def build_query(name: str, qtype: int = TYPE_A, qid: int = 0x4242) -> bytes:
    """A stub resolver's query for `name` (for tests and probes)."""
    labels = b"".join(bytes([len(part)]) + part.encode() for part in name.split(".") if part)
    return HEADER.pack(qid, RD, 1, 0, 0, 0) + labels + b"\0" + struct.pack("!HH", qtype, CLASS_IN)


@dataclass(frozen=True)
class Rule:
    """A `dns` step's rule: how the resolver answers for `names`, `delay_s` late when slow."""

    names: frozenset[str]
    answer: Answer
    delay_s: float = 0.0


@dataclass(frozen=True)
class Decision:
    """What to do with one query: send `reply` (None: nothing) `delay_s` from now, or `forward`
    the query to the upstream after `delay_s`; `answer` and `step` say why, for its event."""

    reply: bytes | None
    answer: str
    delay_s: float = 0.0
    forward: bool = False
    step: str | None = None


@dataclass
class Policy:
    """The lab's names and their addresses (`zone`), the names a step hurts when it names none
    (`target_names`), whether other names go to an upstream resolver, and the steps' rules (the
    latest applied wins where two name the same name)."""

    zone: Mapping[str, str]
    target_names: frozenset[str]
    upstream: bool = False
    rules: dict[str, Rule] = field(default_factory=dict)

    def set_rule(self, step: str, names: Iterable[str] | None, answer: Answer,
                 delay_s: float = 0.0) -> list[str]:
        """Answer `answer` for `names` (the target's when None) from now on; the names hurt."""
        chosen = frozenset(n.lower().rstrip(".") for n in names) if names is not None else (
            self.target_names)
        self.rules.pop(step, None)
        self.rules[step] = Rule(chosen, answer, delay_s)
        return sorted(chosen)

    def clear_rule(self, step: str) -> bool:
        """Normal answers again for `step`'s names (unless another step names them)."""
        return self.rules.pop(step, None) is not None

    def decide(self, query: Query) -> Decision:
        if query.opcode != 0:
            return Decision(build_answer(query, NOTIMP), "notimp")
        step, rule = next(((s, r) for s, r in reversed(self.rules.items())
                           if query.name in r.names), (None, None))
        if rule is None or rule.answer == "slow":
            normal = self._normal(query)
            if rule is None:
                return normal
            return Decision(normal.reply, "slow", rule.delay_s, normal.forward, step)
        if rule.answer == "none":
            return Decision(None, "none", step=step)
        rcode = NXDOMAIN if rule.answer == "nxdomain" else SERVFAIL
        return Decision(build_answer(query, rcode), rule.answer, step=step)

    def _normal(self, query: Query) -> Decision:
        """The answer the lab gives with no fault: a lab name's address (no record of another
        type: the lab is IPv4), another name asked of the upstream, or refused."""
        address = self.zone.get(query.name)
        if address is not None:
            if query.qtype == TYPE_A and query.qclass == CLASS_IN:
                return Decision(build_answer(query, NOERROR, address), "address")
            return Decision(build_answer(query, NOERROR), "nodata")
        if self.upstream:
            return Decision(None, "forwarded", forward=True)
        return Decision(build_answer(query, REFUSED), "refused")
