"""The emulator's sans-I/O core: the emulator, and each of its connections.

No sockets and no clock: the shell hands each `Connection` the frames it received and the time
(`now`, seconds on any monotonic clock), asks `poll(now)` for the frames and closes that are due,
and says when the peer is gone (`peer_closed`); it also calls `Emulator.poll(now)` when
`Emulator.next_due()` says, which forgets the sessions whose handles have died. Every server timer
is the personality's real value times `time_scale`. A connection lives as any of the server's
(`lifecycle`, which a cassette's replay shares); its setup starts a session or resumes one
(`resumption`, over the registry of `sessions`), and from then on its turns are taken in
`turns`; an error closes it as `closes` says.

Memory is bounded: a session keeps CONTEXT_CHARS of conversation (`brain`), an utterance
UTTERANCE_KEPT_S of audio (`audio`), and a session is forgotten when its handles die (reaped, or
2 hours after its connection ended) whether or not anyone connects again.
"""

from __future__ import annotations

import itertools
import random
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from faultlab.emulator.apis import APIS
from faultlab.emulator.audio import TranscriptRegistry, Vad
from faultlab.emulator.brain import Brain, Mind, echo
from faultlab.emulator.closes import EMULATOR_BUG, close_on_bug, refuse, setup_refusal
from faultlab.emulator.lifecycle import Lifecycle
from faultlab.emulator.messages import (
    Cancel,
    Configure,
    FunctionDecl,
    FunctionResults,
    Input,
    Respond,
    Setup,
    UserContent,
)
from faultlab.emulator.messages import Vad as VadSettings
from faultlab.emulator.outbox import Action
from faultlab.emulator.personality import INTERNAL_ERROR, Personality, ServedModel, served_model
from faultlab.emulator.refusals import ProtocolError
from faultlab.emulator.resumption import Refusal, reaped_at, resumption
from faultlab.emulator.sessions import Handles, Session
from faultlab.emulator.turns import Emit, Turns
from faultlab.events import Announcement
from faultlab.protocols import DEFAULT_DIALECT
from faultlab.vocabulary.run import FrameLogged
from faultlab.vocabulary.server import (
    EmulatorForgot,
    EmulatorReleased,
    EmulatorResumed,
    EmulatorTcpGaveUp,
)

__all__ = ["EMULATOR_BUG", "Connection", "Emulator"]


class Emulator:
    """All sessions of one emulator (`handles`), and what every connection shares."""

    def __init__(self, personality: Personality, time_scale: float = 1.0,
                 brain: Brain | None = None, registry: TranscriptRegistry | None = None,
                 emit: Emit | None = None, seed: int | None = None) -> None:
        self.personality = personality
        self.time_scale = time_scale
        self.brain = brain or echo()
        self.registry = registry or TranscriptRegistry()
        self.emit: Emit = emit or (lambda *a, **k: None)
        self.api = APIS[personality.protocol]
        self.rng = random.Random(seed)
        self.handles = Handles(self.scaled(personality.handle_ttl_s), self.rng)
        self._conn_ids = itertools.count(1)

    def scaled(self, seconds: float) -> float:
        return seconds * self.time_scale

    def announce(self, what: Announcement) -> None:
        """Emit an event of the vocabulary (as `EventBus.announce` and `EventWriter.announce`)."""
        self.emit(what.name, **what.fields())

    def draw(self, span: tuple[float, float]) -> float:
        """A server delay from the personality's measured range, time-scaled."""
        return self.scaled(self.rng.uniform(*span))

    def connect(self, now: float, api: str = DEFAULT_DIALECT,
                client_port: int | None = None) -> Connection:
        """A new connection; `client_port`, the peer's, lets the run number it as the router
        saw it (faultlab.connections)."""
        self.poll(now)
        return Connection(self, next(self._conn_ids), now, api, client_port)

    def next_due(self) -> float | None:
        """When a session's handles may die next (None: no session has handles to lose)."""
        return self.handles.next_due()

    def poll(self, now: float) -> None:
        """Forget the sessions whose handles died by `now` (their handles become dead handles)."""
        forgotten = self.handles.forget_dead(now)
        if forgotten:
            self.announce(EmulatorForgot(
                forgotten, kept=len({id(s) for s in self.handles.sessions.values()})))


class Connection(Lifecycle):
    """One WebSocket connection of the emulator (its `Lifecycle`, with the personality's timers:
    reaping, L7, and its longest life): its setup starts a session or resumes one
    (`resumption`), and from then on its `turns` answer the client. It is its session's
    `Holder`."""

    def __init__(self, emulator: Emulator, number: int, now: float, api: str,
                 client_port: int | None = None) -> None:
        super().__init__(emulator, number, now, api, client_port)
        self.em = emulator
        self.p = emulator.personality
        self.last_client_msg = now
        self.session: Session | None = None
        self.encoder = emulator.api.encoder(api, self.p, emulator.rng)
        self.turns: Turns | None = None  # from the setup on
        self._ready_at = now  # when the session is ready (its setupComplete, session.created)
        self._setup_seen = False
        self._silent = False  # a dead handle's resume left unanswered (S5)
        self.model: ServedModel | None = None
        self.held_after_timeout = False
        self._lifetime_end: float | None = None
        if self.p.connection_lifetime_s is not None:
            self._lifetime_end = now + self.em.scaled(self.p.connection_lifetime_s)
            left = min(self.p.go_away_before_s, self.p.connection_lifetime_s)
            at = self._lifetime_end - self.em.scaled(left)
            for frame in self.encoder.go_away(left):
                self.outbox.send(at, frame)

    # The shell's interface (with the lifecycle's next_due and peer_closed).

    def begin(self, path: str, headers: Mapping[str, str], now: float) -> None:
        """The WebSocket is open (its request's `path` and `headers`): a session that opens with
        the connection (OpenAI) opens now."""
        try:
            setup = self.em.api.opening(path, headers)
            if setup is None:
                return
            self._setup_seen = True
            self._on_setup(setup, now)
        except ProtocolError as exc:
            self._setup_seen = True
            self._refuse(now + self.em.draw(self.p.invalid_argument_s), exc, "refused request")
        except Exception as exc:  # a bug
            close_on_bug(self, now, exc, "the connection's opening")

    def adopt(self, path: str, headers: Mapping[str, str], earlier: Sequence[str | bytes],
              now: float) -> None:
        """Take over a connection another server answered so far (a cassette's replay, where
        its client diverged): its opening (`path`, `headers`) and what set its session up among
        the client's `earlier` messages (a setup, a configuration) are taken as if sent now,
        the session opened fresh (a handle this emulator never issued is left out), and what the
        emulator would have said of them is left unsaid; a refusal still closes."""
        mark = self.outbox.mark()
        self.begin(path, headers, now)
        for raw in earlier:
            try:
                message = self.em.api.parse(raw).message
            except ProtocolError:
                continue
            if isinstance(message, Setup) and not self._setup_seen:
                self._setup_seen = True
                self._on_setup(replace(message, handle=None), now)
            elif isinstance(message, Configure) and self.session is not None:
                self._configure(message)
        self.outbox.unsay(mark)

    def receive(self, raw: str | bytes, now: float) -> None:
        """A frame from the client."""
        if self.closed or self.closing or self._silent:
            return
        self.last_client_msg = now
        parsed = None
        try:
            parsed = self.em.api.parse(raw)
            self.em.announce(FrameLogged("emulator", "client", self.number, parsed.raw_kind,
                                         len(raw), extra=self._audio_note(parsed.message)))
            if self.session is None and not isinstance(parsed.message, Setup):
                raise ProtocolError("The first message must be a setup message.")
            if isinstance(parsed.message, Setup):
                if self.session is not None or self._setup_seen:
                    raise ProtocolError("Setup may only be sent once.")
                self._setup_seen = True
                self._on_setup(parsed.message, now)
                return
            assert self.session is not None and self.turns is not None
            self.session.consumed += 1
            if isinstance(parsed.message, UserContent):
                self.turns.on_client_content(parsed.message, now)
            elif isinstance(parsed.message, Input):
                self.turns.on_realtime(parsed.message, now)
            elif isinstance(parsed.message, FunctionResults):
                self.turns.on_tool_response(parsed.message, now)
            elif isinstance(parsed.message, Configure):
                self._configure(parsed.message)
            elif isinstance(parsed.message, Respond):
                self.turns.on_respond(now)
            elif isinstance(parsed.message, Cancel):
                self.turns.on_cancel(now)
            # Never before the session is ready: OpenAI's session.created comes first (O2).
            answered = max(now, self._ready_at)
            for frame in self.encoder.acknowledge(parsed, self.session.setup):
                self.outbox.send(answered, frame)
        except ProtocolError as exc:
            if exc.event_id is None and parsed is not None:
                exc.event_id = parsed.event_id
            self._refuse(now, exc, "bad client message")
        except Exception as exc:  # a bug: every input error is a ProtocolError
            close_on_bug(self, now, exc, "a client frame")

    def poll(self, now: float) -> list[Action]:
        """The frames and closes due by `now`, in order; after a close, nothing more."""
        out: list[Action] = []
        try:
            self._due(now, out)
        except Exception as exc:  # while answering (the brain, speech): a bug, not a behaviour
            close_on_bug(self, now, exc, "a timer")
            self._due(now, out)
        return out

    def holds(self, now: float) -> bool:
        """Whether this connection still holds its session (locking out resumes)."""
        if not self.closed:
            return True
        if not self.held_after_timeout:
            return False
        if now >= reaped_at(self.last_client_msg, self.p, self.em.scaled):
            # Reaped while nobody could hear it: the session and its handles die (L7).
            assert self.session is not None
            self.session.dead = True
            self.held_after_timeout = False
            self._release(now)
            return False
        return True

    # The lifecycle's hooks.

    def _timers(self) -> Iterable[float | None]:
        return self._reap_at(), None if self.closing else self._lifetime_end

    def _fire(self, now: float) -> None:
        reap = self._reap_at()
        if reap is not None and reap <= now and not self.closing:
            self.close(reap, 1011, INTERNAL_ERROR, "reaped: silent connection")
            if self.session is not None:
                self.session.dead = True
        if self._lifetime_end is not None and self._lifetime_end <= now and not self.closing:
            code, reason = self.em.api.lifetime_over(self.p)
            for frame in self.encoder.expired(reason):
                self.outbox.send(self._lifetime_end, frame)
            self.close(self._lifetime_end, code, reason, "connection lifetime over")

    def _think(self, at: float) -> None:
        assert self.turns is not None
        self.turns.think(at)

    def _sent(self, action: Action) -> None:
        if self.session is not None:
            self.session.last_activity = action.at

    def _closed_by_server(self, now: float) -> None:
        self._release(now)

    def _lost(self, now: float, timed_out: bool) -> None:
        """Gone before the server closed it: the session is let go, or, when TCP gave up
        retransmitting, stays held (L8) until the connection would have been reaped."""
        s = self.session
        if timed_out and self.p.tcp_timeout_keeps_lock and s is not None and s.holder is self:
            self.held_after_timeout = True
            self.em.announce(EmulatorTcpGaveUp(self.number, s.id))
            self.em.handles.check_at(s, reaped_at(self.last_client_msg, self.p, self.em.scaled))
        else:
            self._release(now)

    def drop_scheduled(self) -> None:
        super().drop_scheduled()
        if self.turns is not None:
            self.turns.cancel()

    # Internals.

    def _reap_at(self) -> float | None:
        """When a silent connection is closed (L7): with or without a session (one left
        unanswered, or that never sent its setup, is not held forever)."""
        if self.closing or self.closed:
            return None
        return reaped_at(self.last_client_msg, self.p, self.em.scaled)

    def _release(self, now: float) -> None:
        s = self.session
        if s is not None and s.holder is self:
            s.holder = None
            s.dropped_at = now
            assert self.turns is not None  # a session is held from the setup on
            s.dropped_speaking = self.turns.speaking(now)
            if s.dropped_speaking and (unheard := self.turns.unheard(now)) is not None:
                s.cut_speech = unheard
            self.em.announce(EmulatorReleased(self.number, s.id, s.dropped_speaking))
            self.em.handles.check_at(s, now if s.dead else self.em.handles.end(now))

    def _configure(self, change: Configure) -> None:
        """The session's settings change (instructions and functions are added to the mind)."""
        assert self.session is not None and self.turns is not None
        mind = self.session.mind
        if change.system_instruction:
            mind.instruct(change.system_instruction)
        declared = {f.name: f.behavior for f in change.functions}
        mind.declared = declared if change.replace_functions else mind.declared | declared
        setup = self.session.setup
        self.session.setup = replace(
            setup, functions=(change.functions if change.replace_functions
                              else _merged(setup.functions, change.functions)),
            modalities=change.modalities or setup.modalities, vad=change.vad or setup.vad,
            input_transcription=(setup.input_transcription if change.input_transcription is None
                                 else change.input_transcription))
        if change.vad is not None and change.vad != setup.vad:  # clients resend it unchanged
            self.turns.set_vad(self._vad(change.vad))

    def _refuse(self, at: float, error: ProtocolError, why: str) -> None:
        refuse(self, self.em.api, self.encoder, at, self._ready_at, error, why)

    def _audio_note(self, message: object) -> dict[str, Any]:
        if isinstance(message, Input) and message.audio:
            return {"audio_s": round(len(message.audio) / 2 / message.audio_rate, 4)}
        return {}

    def _on_setup(self, setup: Setup, now: float) -> None:
        p, em = self.p, self.em
        self.model = served_model(p, em.api.model_id(setup.model))
        refused = setup_refusal(p, self.model, setup)
        if isinstance(refused, ProtocolError):
            self._refuse(now + em.draw(p.invalid_argument_s), refused, "unknown model")
            return
        if refused is not None:
            code, reason, why = refused
            self.close(now + em.draw(p.invalid_argument_s), code, reason, why)
            return
        if setup.handle is not None:
            self._resume(setup, now)
            return
        # The instruction is kept once, in the mind (which bounds it), not in the setup as well.
        session = Session(id=uuid.uuid4().hex[:16], setup=replace(setup, system_instruction=""),
                          mind=Mind(declared={f.name: f.behavior for f in setup.functions}))
        if setup.system_instruction:
            session.mind.instruct(setup.system_instruction)
        self._attach(session, setup, now, now + em.draw(p.setup_complete_s),
                     p.resumption_update_s)

    def _resume(self, setup: Setup, now: float) -> None:
        p, em = self.p, self.em
        assert setup.handle is not None
        got = resumption(em.handles, setup.handle, now, p, em.rng, em.scaled, self.number)
        if isinstance(got, Refusal):
            if got.told is not None:
                em.announce(got.told)
            if got.code is None:
                self._silent = True
            else:
                self.close(now + em.draw(got.delay), got.code, got.reason, got.why)
            return
        em.announce(EmulatorResumed(self.number, got.id))
        got.mind.declared |= {f.name: f.behavior for f in setup.functions}
        got.setup = replace(got.setup, resumption=setup.resumption, handle=setup.handle)
        self._attach(got, setup, now, now + em.draw(p.resumed_setup_complete_s),
                     p.resumed_resumption_update_s)

    def _vad(self, asked: VadSettings) -> Vad | None:
        """The server's VAD as the client configured it (None: the client marks its turns)."""
        if asked.disabled:
            return None
        return Vad(silence_ms=asked.silence_duration_ms or self.p.vad_silence_ms,
                   prefix_padding_ms=asked.prefix_padding_ms or self.p.vad_prefix_padding_ms,
                   start_sensitivity=asked.start_sensitivity,
                   end_sensitivity=asked.end_sensitivity)

    def _attach(self, session: Session, setup: Setup, now: float, ready_at: float,
                update_span: tuple[float, float]) -> None:
        self.session = session
        self._ready_at = ready_at
        session.holder = self
        session.dropped_at = None
        self.turns = Turns(self.em, self.outbox, self.encoder, session, self.model,
                           self._vad(setup.vad), self.number)
        self.turns.ready_at = ready_at
        for frame in self.encoder.setup_complete(session.id, setup):
            self.outbox.send(ready_at, frame)
        if setup.resumption:
            update = self.encoder.resumption_update(
                self.em.handles.issue(session), session.consumed if setup.transparent else None)
            at = ready_at + self.em.draw(update_span)
            for frame in update:
                self.outbox.send(at, frame)
        if session.cut_speech:
            self.turns.repeat(session.cut_speech, ready_at + self.em.draw(self.p.tool_reply_s))
            session.cut_speech = None


def _merged(functions: tuple[FunctionDecl, ...],
            more: tuple[FunctionDecl, ...]) -> tuple[FunctionDecl, ...]:
    """`functions` with `more` added, a function declared again taking its new declaration."""
    names = {f.name for f in more}
    return tuple(f for f in functions if f.name not in names) + more
