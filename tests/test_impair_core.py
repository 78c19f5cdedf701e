"""The userspace queue's decisions on a fake clock: delays, order, bursty loss, reordering,
duplication, corruption, and verdicts the kernel can take in one datagram."""

from __future__ import annotations

import itertools
import random
import statistics

import pytest

from faultlab.impair.core import (
    FADE_STEP_S,
    REORDER_HOLD_S,
    GilbertElliott,
    Impairer,
    Lane,
    Shape,
    Verdict,
    corrupted,
)

Q = 1000


def lane(seed: int = 1, **shape: object) -> Lane:
    return Lane(Q, Shape(**shape), random.Random(seed))  # type: ignore[arg-type]


def test_a_packet_is_released_when_its_latency_has_passed() -> None:
    """With 50 ms of latency, a packet queued at t=1 has no verdict at 1.049 and is accepted at
    1.050 by a batch verdict (nothing older is held)."""
    ln = lane(latency_s=0.05)
    ln.receive(7, 1.0, None)
    assert ln.next_due() == pytest.approx(1.05)
    assert ln.poll(1.049) == []
    assert ln.poll(1.05) == [Verdict(Q, 7, True, through=True)]
    assert ln.next_due() is None


def test_uniform_jitter_stays_within_its_bounds_and_keeps_order() -> None:
    """latency 20 ms ± 5 ms uniform: each packet alone is delayed 15-25 ms with a mean near 20;
    with keep_order a packet is never due before the one ahead of it."""
    ln = lane(latency_s=0.02, jitter_s=0.005, keep_order=False)
    delays = [ln.delay() for _ in range(20_000)]
    assert min(delays) >= 0.015 and max(delays) <= 0.025
    assert statistics.mean(delays) == pytest.approx(0.02, abs=2e-4)
    ordered = lane(latency_s=0.02, jitter_s=0.005)
    for i in range(200):
        ordered.receive(i, i * 0.001, None)
    dues = [d for d, _, _ in sorted(ordered.waiting, key=lambda e: e[1])]
    assert dues == sorted(dues)


def test_normal_jitter_has_the_asked_spread_and_never_goes_negative() -> None:
    """normal: jitter is the standard deviation; a draw below zero delays by zero."""
    ln = lane(latency_s=0.02, jitter_s=0.01, distribution="normal", keep_order=False)
    delays = [ln.delay() for _ in range(20_000)]
    assert statistics.stdev(delays) == pytest.approx(0.01, rel=0.1)
    assert min(delays) >= 0.0


def test_without_keep_order_jitter_lets_packets_overtake() -> None:
    """keep_order false: with jitter larger than the spacing, some packets leave before ones
    queued earlier."""
    ln = lane(latency_s=0.02, jitter_s=0.01, keep_order=False)
    order: list[int] = []
    for step in range(400):
        now = step * 0.0005
        if step % 2 == 0 and step < 200:
            ln.receive(step // 2, now, None)
        for v in ln.poll(now):
            # A batch verdict lets go, in id order, every packet up to its id not yet let go.
            order += [i for i in range(v.packet_id + 1) if i not in order] if v.through else [
                v.packet_id]
    assert sorted(order) == list(range(100)) and order != list(range(100))


@pytest.mark.parametrize(("rate", "burst"), [(0.02, 1.0), (0.05, 4.0), (0.2, 10.0)])
def test_gilbert_elliott_loses_the_asked_share_in_runs_of_the_asked_length(
        rate: float, burst: float) -> None:
    """Over 200,000 packets the chain loses `rate` of them (±10 %), in runs averaging `burst`
    packets (±10 %)."""
    chain = GilbertElliott(rate, burst, random.Random(3))
    outcomes = [chain.lost() for _ in range(200_000)]
    assert sum(outcomes) / len(outcomes) == pytest.approx(rate, rel=0.1)
    assert statistics.mean(loss_runs(outcomes)) == pytest.approx(burst, rel=0.1)


def loss_runs(outcomes: list[bool]) -> list[int]:
    runs, run = [], 0
    for lost in outcomes:
        if lost:
            run += 1
        elif run:
            runs.append(run)
            run = 0
    return runs


@pytest.mark.parametrize("spacing_ms", [0.1, 0.5])
def test_packets_sent_back_to_back_see_the_asked_runs(spacing_ms: float) -> None:
    """Packets much closer together than a fade's step (FADE_STEP_S) see the chain stepped
    about once each: 5 % lost in runs of 4 (±10 %), as without time."""
    chain = GilbertElliott(0.05, 4.0, random.Random(7))
    outcomes = [chain.lost(i * spacing_ms / 1000) for i in range(200_000)]
    assert sum(outcomes) / len(outcomes) == pytest.approx(0.05, rel=0.1)
    assert statistics.mean(loss_runs(outcomes)) == pytest.approx(4.0, rel=0.1)


def test_a_fade_is_forgotten_over_quiet_as_a_stalled_flow_retransmits() -> None:
    """Packets 0.2 s apart (a stalled TCP flow's retransmissions) still lose 5 %, but each
    independently of the one before: after a lost one the next is lost about 5 % of the time,
    not 75 % (runs of 4 stepped per packet), so six in a row are lost about never."""
    chain = GilbertElliott(0.05, 4.0, random.Random(11))
    outcomes = [chain.lost(i * 0.2) for i in range(100_000)]
    after_loss = [b for a, b in itertools.pairwise(outcomes) if a]
    assert sum(outcomes) / len(outcomes) == pytest.approx(0.05, rel=0.1)
    assert sum(after_loss) / len(after_loss) == pytest.approx(0.05, abs=0.02)
    assert max(loss_runs(outcomes)) <= 4


def test_the_chain_steps_through_the_quiet_by_fade_steps() -> None:
    """A pause of n fade steps moves the chain as n + 1 packets would: from the bad state, the
    chance to be bad after a pause follows the chain's n-step transition, measured."""
    quiet_s = 3.5 * FADE_STEP_S  # three whole steps of quiet
    stayed = 0
    tries = 50_000
    rng = random.Random(5)
    for _ in range(tries):
        chain = GilbertElliott(0.1, 5.0, rng)
        chain.bad, chain.last = True, 0.0
        stayed += chain.lost(quiet_s)
    # By hand: four steps of the chain with enter 1/45, leave 1/5 from the bad state.
    p = [[44 / 45, 1 / 45], [1 / 5, 4 / 5]]
    bad = [0.0, 1.0]
    for _ in range(4):
        bad = [bad[0] * p[0][0] + bad[1] * p[1][0], bad[0] * p[0][1] + bad[1] * p[1][1]]
    assert stayed / tries == pytest.approx(bad[1], abs=0.01)


def test_quiet_fades_an_overshooting_chain_towards_independent_losses() -> None:
    """Half lost in runs of 1.5 makes a chain whose step overshoots (keep = -1/3). Packets
    10.5 ms apart (one quiet step each, two on some) see runs between 1.5 (its own) and 2 (of
    independent losses at 50 %), their share still a half: quiet fades the chain's memory, never
    flips it (an even count of steps does not make runs longer than independence gives)."""
    chain = GilbertElliott(0.5, 1.5, random.Random(13))
    assert chain.keep == pytest.approx(-1 / 3)
    outcomes = [chain.lost(i * 0.0105) for i in range(40_000)]
    assert sum(outcomes) / len(outcomes) == pytest.approx(0.5, abs=0.02)
    assert 1.6 < statistics.mean(loss_runs(outcomes)) < 1.95


def test_the_quiet_counts_the_clock_s_ticks_not_each_gap_s_whole_steps() -> None:
    """Two gaps of 6 ms: the one across a tick of the 10 ms clock steps the chain twice, the
    one within a tick once (whole steps of each gap would step both once); measured from the bad
    state as the one- and two-step transitions give."""
    def stayed_bad(last: float, now: float) -> float:
        rng, tries, stayed = random.Random(17), 50_000, 0
        for _ in range(tries):
            chain = GilbertElliott(0.1, 5.0, rng)
            chain.bad, chain.last = True, last
            stayed += chain.lost(now)
        return stayed / tries

    one = 4 / 5  # stays bad: 1 - leave
    two = one * one + (1 / 5) * (1 / 45)  # bad-bad-bad, or bad-good-bad
    assert stayed_bad(0.001, 0.007) == pytest.approx(one, abs=0.01)
    assert stayed_bad(0.005, 0.011) == pytest.approx(two, abs=0.01)


def test_a_lost_packet_is_dropped_at_once_before_the_batch_that_follows() -> None:
    """Bursty loss drops at once; a later batch accept cannot cover a dropped id because the
    drop verdict comes first in the same datagram."""
    ln = lane(latency_s=0.0, loss=0.5, loss_burst=2.0, seed=5)
    for i in range(50):
        ln.receive(i, 0.0, None)
    out = ln.poll(0.0)
    drops = [v.packet_id for v in out if not v.accept]
    assert drops and out[:len(drops)] == [Verdict(Q, i, False) for i in drops]
    assert out[-1] == Verdict(Q, max(set(range(50)) - set(drops)), True, through=True)


def test_a_reordered_packet_leaves_after_gap_later_ones() -> None:
    """A packet held back is released right after `reorder_gap` later packets, by single
    verdicts in that order (a batch would release it early, or first); batches resume after."""
    ln = lane(reorder=1.0, reorder_gap=3)
    ln.receive(0, 0.0, None)
    ln.shape = Shape(reorder=0.0, reorder_gap=3)  # only packet 0 is held
    outs = []
    for i in range(1, 6):
        ln.receive(i, 0.0, None)
        outs.append(ln.poll(0.0))
    assert outs[:3] == [[Verdict(Q, 1, True)], [Verdict(Q, 2, True)],
                        [Verdict(Q, 3, True), Verdict(Q, 0, True)]]
    assert outs[3:] == [[Verdict(Q, 4, True, through=True)], [Verdict(Q, 5, True, through=True)]]
    assert ln.held == []


def test_a_held_packet_is_let_go_on_a_quiet_flow() -> None:
    """With no later packets, a held packet leaves REORDER_HOLD_S past its time."""
    ln = lane(reorder=1.0, reorder_gap=3)
    ln.receive(0, 0.0, None)
    assert ln.next_due() == pytest.approx(REORDER_HOLD_S)
    assert ln.poll(REORDER_HOLD_S / 2) == []
    assert ln.poll(REORDER_HOLD_S) == [Verdict(Q, 0, True)]


def test_duplicates_and_corruption_come_with_their_bytes() -> None:
    """A duplicated packet is accepted and its bytes come back as a copy to send; a corrupted
    one gets a single verdict carrying the changed bytes."""
    packet = bytes(20 + 20 + 10)
    dup = lane(duplicate=1.0)
    dup.receive(1, 0.0, packet)
    assert dup.poll(0.0) == [Verdict(Q, 1, True, through=True), Verdict(Q, 1, True, copy=packet)]
    bad = lane(corrupt=1.0)
    bad.receive(1, 0.0, packet)
    (verdict,) = bad.poll(0.0)
    assert verdict.accept and not verdict.through and verdict.payload not in (None, packet)


def tcp_packet(payload: int) -> bytes:
    """An IPv4 TCP packet with a 32-byte TCP header and `payload` bytes of data."""
    ip = bytes([0x45]) + bytes(8) + bytes([6]) + bytes(10)
    tcp = bytes(12) + bytes([8 << 4]) + bytes(19)
    return ip + tcp + bytes(payload)


@pytest.mark.parametrize(("payload", "first"), [(100, 52), (0, 51)])
def test_corruption_flips_one_bit_past_the_transport_header(payload: int, first: int) -> None:
    """One bit differs, in the data (or, with none, the header's last byte)."""
    packet = tcp_packet(payload)
    rng = random.Random(9)
    for _ in range(200):
        out = corrupted(packet, rng)
        diff = [i for i, (a, b) in enumerate(zip(packet, out, strict=True)) if a != b]
        assert len(diff) == 1 and diff[0] >= first
        assert bin(packet[diff[0]] ^ out[diff[0]]).count("1") == 1


def test_flush_lets_every_waiting_packet_go() -> None:
    """On removal every waiting or held packet is accepted at once."""
    imp = Impairer(Shape(latency_s=10.0, reorder=0.5), [Q, Q + 1], random.Random(2))
    for i in range(20):
        imp.receive(Q + i % 2, i, 0.0, None)
    out = imp.flush()
    covered = {(v.queue, v.packet_id) for v in out if not v.through}
    for queue in (Q, Q + 1):
        top = max([v.packet_id for v in out if v.through and v.queue == queue], default=-1)
        ids = {i for i in range(20) if Q + i % 2 == queue}
        assert all((queue, i) in covered or i <= top for i in ids)
    assert imp.next_due() is None
