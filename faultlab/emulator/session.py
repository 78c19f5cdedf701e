"""The emulator's sans-I/O core: sessions, handles, lockout, tools, turns.

No sockets and no clock: the shell hands each `Connection` the frames it received and the time
(`now`, seconds on any monotonic clock), asks `poll(now)` for the frames and closes that are due,
and says when the peer is gone (`peer_closed`); it also calls `Emulator.poll(now)` when
`Emulator.next_due()` says, which forgets the sessions whose handles have died. Every server timer
is the personality's real value times `time_scale`.

Memory is bounded: a session keeps CONTEXT_CHARS of conversation (`brain`), an utterance
UTTERANCE_KEPT_S of audio (`audio`), and a session is forgotten when its handles die (reaped, or
2 hours after its connection ended) whether or not anyone connects again. Every input error closes
1007 (or 1008: `wire`); anything else raised while handling a frame or a timer is an emulator bug:
its traceback goes to the log and the connection is closed 1011 with EMULATOR_BUG, which no
behaviour uses.
"""

from __future__ import annotations

import base64
import heapq
import itertools
import json
import logging
import random
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from faultlab.emulator.audio import (
    RATE_IN,
    RATE_OUT,
    TranscriptRegistry,
    Utterance,
    Vad,
    resample,
    synthesise,
)
from faultlab.emulator.brain import Brain, CallRecord, Mind, Reply, booking_assistant, is_placeholder
from faultlab.emulator.personality import (
    INTERNAL_ERROR,
    INVALID_ARGUMENT,
    Personality,
    ServedModel,
    served_model,
)
from faultlab.emulator.wire import (
    ClientContent,
    ContextUpdate,
    ProtocolError,
    RealtimeInput,
    Setup,
    ToolResponse,
    close_reason,
    parse_frame,
)

log = logging.getLogger(__name__)
Frame = dict[str, Any]
Emit = Callable[..., None]
TRANSPARENT_REFUSED = ('Invalid JSON payload received. Unknown name "transparent" at '
                       "'setup.session_resumption': Cannot find field.")
MODALITIES_REFUSED = ("The requested combination of response modalities ({modalities}) is not "
                      "supported by the model.")
DEADLINE = "Deadline expired before operation could complete."
EMULATOR_BUG = "Internal error encountered (an emulator bug: see its log)."
DEAD_HANDLES_KEPT = 10_000
RESULT_KEPT_BYTES = 4096


@dataclass(order=True)
class Action:
    """A frame to send (`frame`) or a close (`code`, `reason`), due at `at`; or, internal to the
    core, the moment the model answers the user's turn (`think`)."""

    at: float
    seq: int
    frame: Frame | None = field(default=None, compare=False)
    code: int = field(default=0, compare=False)
    reason: str = field(default="", compare=False)
    turn: int = field(default=0, compare=False)
    audio_s: float = field(default=0.0, compare=False)
    think: bool = field(default=False, compare=False)


@dataclass
class Session:
    """What a resumption handle restores: the model's state across connections."""

    id: str
    setup: Setup
    mind: Mind
    handles: set[str] = field(default_factory=set)
    holder: Connection | None = None
    dropped_at: float | None = None
    dropped_speaking: bool = False
    last_activity: float = 0.0
    dead: bool = False
    consumed: int = 0
    cut_speech: str | None = None  # what a drop cut short, partly repeated on resume (R6)


class Emulator:
    """All sessions of one emulator, and what every connection shares."""

    def __init__(self, personality: Personality, time_scale: float = 1.0,
                 brain: Brain | None = None, registry: TranscriptRegistry | None = None,
                 emit: Emit | None = None, seed: int | None = None) -> None:
        self.personality = personality
        self.time_scale = time_scale
        self.brain = brain or booking_assistant()
        self.registry = registry or TranscriptRegistry()
        self.emit: Emit = emit or (lambda *a, **k: None)
        self.rng = random.Random(seed)
        self.sessions: dict[str, Session] = {}
        # Handles of reaped or expired sessions (S5 tells them from handles never issued); the
        # oldest are forgotten past DEAD_HANDLES_KEPT.
        self.dead_handles: dict[str, None] = {}
        self._conn_ids = itertools.count(1)
        self._seq = itertools.count()
        # When to look at a session with handles again: its connection ended, or it may be
        # reaped (a heap; a session resumed since is looked at and left alone).
        self._checks: list[tuple[float, int, Session]] = []

    def scaled(self, seconds: float) -> float:
        return seconds * self.time_scale

    def draw(self, span: tuple[float, float]) -> float:
        """A server delay from the personality's measured range, time-scaled."""
        return self.scaled(self.rng.uniform(*span))

    def connect(self, now: float, api: str = "developer",
                client_port: int | None = None) -> Connection:
        """A new connection; `client_port`, the peer's, lets the run number it as the router
        saw it (faultlab.connections)."""
        self.poll(now)
        return Connection(self, next(self._conn_ids), now, api, client_port)

    def expired(self, session: Session, now: float) -> bool:
        """Dead, or dropped longer ago than a handle lives (2 hours after the session ended)."""
        return session.dead or (
            session.holder is None and session.dropped_at is not None
            and now >= self.handles_end(session.dropped_at))

    def handles_end(self, dropped_at: float) -> float:
        """When the handles of a session dropped at `dropped_at` die, unless it is resumed."""
        return dropped_at + self.scaled(self.personality.handle_ttl_s)

    def next_due(self) -> float | None:
        """When a session's handles may die next (None: no session has handles to lose)."""
        return self._checks[0][0] if self._checks else None

    def poll(self, now: float) -> None:
        """Forget the sessions whose handles died by `now` (their handles become dead handles)."""
        forgotten = 0
        while self._checks and self._checks[0][0] <= now:
            _, _, session = heapq.heappop(self._checks)
            holder = session.holder
            if holder is not None and holder.closed:
                holder.holds(now)  # a connection held past its TCP's end is reaped by now
            if self.expired(session, now) and session.handles:
                self._forget(session)
                forgotten += 1
        if forgotten:
            self.emit("emulator.forgot", sessions=forgotten,
                      kept=len({id(s) for s in self.sessions.values()}))

    def check_at(self, session: Session, at: float) -> None:
        """Look at `session` again at `at` (its handles may die then)."""
        if session.handles:
            heapq.heappush(self._checks, (at, next(self._seq), session))

    def _forget(self, session: Session) -> None:
        for handle in session.handles:
            self.sessions.pop(handle, None)
            self.dead_handles[handle] = None
        session.handles = set()
        # Past DEAD_HANDLES_KEPT the oldest dead handles count as never issued (1007, not S5's
        # 1011 or silence): a memory bound, not a measured behaviour.
        while len(self.dead_handles) > DEAD_HANDLES_KEPT:
            del self.dead_handles[next(iter(self.dead_handles))]

    def new_handle(self, session: Session) -> str:
        handle = str(uuid.UUID(int=self.rng.getrandbits(128), version=4))
        session.handles.add(handle)
        self.sessions[handle] = session
        return handle


class Connection:
    """One WebSocket connection's protocol state."""

    def __init__(self, emulator: Emulator, number: int, now: float, api: str,
                 client_port: int | None = None) -> None:
        self.em = emulator
        self.p = emulator.personality
        self.number = number
        self.api = api
        self.opened_at = now
        self.last_client_msg = now
        self.session: Session | None = None
        self.closed = False
        self.closing = False
        self._outbox: list[Action] = []
        self._turn = 0
        self._speaking_until = 0.0
        self._speech: tuple[str, float, float] | None = None  # text, start, end of playback
        self._vad: Vad | None = None
        self._manual_audio: Utterance | None = None
        self._setup_seen = False
        self._silent = False  # a dead handle's resume left unanswered (S5)
        # Turn-taking: the model's next answer, when due (an action in the outbox); whether it
        # owes the user an answer (a user turn ended), and how many turns came after that end
        # (clientContent with turnComplete false: for the next turn); tool results it has not
        # spoken of; whether the user is speaking (VAD or activityStart), or has sent parts with
        # words and no turnComplete yet; when the model's turn under way ends.
        self._thinking: Action | None = None
        self._answer_owed = False
        self._held_back = 0
        self._results: list[CallRecord] = []
        self._user_speaking = False
        self._turn_open = False
        self._model_turn_end = 0.0
        self.model: ServedModel | None = None
        self._gone = False
        self.held_after_timeout = False
        self.em.emit("emulator.connect", conn=number, api=api,
                     **({"client_port": client_port} if client_port is not None else {}))
        self._lifetime_end: float | None = None
        if self.p.connection_lifetime_s is not None:
            self._lifetime_end = now + self.em.scaled(self.p.connection_lifetime_s)
            left = min(self.p.go_away_before_s, self.p.connection_lifetime_s)
            self._send(self._lifetime_end - self.em.scaled(left),
                       {"goAway": {"timeLeft": f"{left:g}s"}})

    # The shell's interface.

    def receive(self, raw: str | bytes, now: float) -> None:
        """A frame from the client."""
        if self.closed or self.closing or self._silent:
            return
        self.last_client_msg = now
        try:
            parsed = parse_frame(raw)
            self.em.emit("emulator.frame", conn=self.number, **{"from": "client"}, kind=parsed.raw_kind,
                         bytes=len(raw), **self._audio_note(parsed.message))
            if self.session is None and not isinstance(parsed.message, Setup):
                raise ProtocolError("The first message must be a setup message.")
            if isinstance(parsed.message, Setup):
                if self.session is not None or self._setup_seen:
                    raise ProtocolError("Setup may only be sent once.")
                self._setup_seen = True
                self._on_setup(parsed.message, now)
                return
            assert self.session is not None
            self.session.consumed += 1
            if isinstance(parsed.message, ClientContent):
                self._on_client_content(parsed.message, now)
            elif isinstance(parsed.message, RealtimeInput):
                self._on_realtime(parsed.message, now)
            elif isinstance(parsed.message, ToolResponse):
                self._on_tool_response(parsed.message, now)
            elif isinstance(parsed.message, ContextUpdate):
                mind = self.session.mind
                if parsed.message.system_instruction:
                    mind.instruct(parsed.message.system_instruction)
                mind.declared |= {f.name: f.behavior for f in parsed.message.functions}
        except ProtocolError as exc:
            # The event keeps what a close frame's 123 bytes cut (a long field path).
            full = {"detail": str(exc)[:500]} if str(exc) != exc.reason else {}
            self._close(now, exc.code, exc.reason, "bad client message", **full)
        except Exception as exc:  # a bug: every input error is a ProtocolError
            self._bug(now, exc, "a client frame")

    def next_due(self) -> float | None:
        """When the next frame or close is due (None: nothing scheduled)."""
        if self.closed:
            return None
        times = [self._outbox[0].at if self._outbox else None, self._reap_at(),
                 None if self.closing else self._lifetime_end]
        return min((t for t in times if t is not None), default=None)

    def poll(self, now: float) -> list[Action]:
        """The frames and closes due by `now`, in order; after a close, nothing more."""
        out: list[Action] = []
        try:
            self._due(now, out)
        except Exception as exc:  # while answering (the brain, speech): a bug, not a behaviour
            self._bug(now, exc, "a timer")
            self._due(now, out)
        return out

    def _due(self, now: float, out: list[Action]) -> None:
        reap = self._reap_at()
        if reap is not None and reap <= now and not self.closing:
            self._close(reap, 1011, INTERNAL_ERROR, "reaped: silent connection")
            if self.session is not None:
                self.session.dead = True
        if self._lifetime_end is not None and self._lifetime_end <= now and not self.closing:
            self._close(self._lifetime_end, 1011, DEADLINE, "connection lifetime over")
        while self._outbox and self._outbox[0].at <= now and not self.closed:
            action = heapq.heappop(self._outbox)
            if action.think:
                self._think(action.at)
                continue
            out.append(action)
            if action.frame is None:
                self.closed = True
                self._release(now)
                self._outbox.clear()
                self._thinking = None
            elif self.session is not None:
                self.session.last_activity = action.at

    def peer_closed(self, now: float, timed_out: bool = False) -> None:
        """The connection is gone from the server's view (close frame, FIN, RST, or ours), or
        its TCP gave up retransmitting (`timed_out`): then the session stays held (L8) until the
        connection would have been reaped."""
        if self._gone:
            return
        self._gone = True
        if not self.closed:
            self.closed = True
            self._outbox.clear()
            self._thinking = None
            s = self.session
            if timed_out and self.p.tcp_timeout_keeps_lock and s is not None and s.holder is self:
                self.held_after_timeout = True
                self.em.emit("emulator.tcp_gave_up", conn=self.number, session=s.id)
                self.em.check_at(s, self.last_client_msg + self.em.scaled(self.p.reap_after_s))
            else:
                self._release(now)
        self.em.emit("emulator.disconnect", conn=self.number,
                     **({"timed_out": True} if timed_out else {}))

    def holds(self, now: float) -> bool:
        """Whether this connection still holds its session (locking out resumes)."""
        if not self.closed:
            return True
        if not self.held_after_timeout:
            return False
        if now >= self.last_client_msg + self.em.scaled(self.p.reap_after_s):
            # Reaped while nobody could hear it: the session and its handles die (L7).
            assert self.session is not None
            self.session.dead = True
            self.held_after_timeout = False
            self._release(now)
            return False
        return True

    # Internals.

    def _reap_at(self) -> float | None:
        """When a silent connection is closed (L7): with or without a session (one left
        unanswered, or that never sent its setup, is not held forever)."""
        if self.closing or self.closed:
            return None
        return self.last_client_msg + self.em.scaled(self.p.reap_after_s)

    def _release(self, now: float) -> None:
        s = self.session
        if s is not None and s.holder is self:
            s.holder = None
            s.dropped_at = now
            s.dropped_speaking = self._speaking_until > now
            if s.dropped_speaking and self._speech is not None:
                s.cut_speech = _unheard(*self._speech, now)
            self.em.emit("emulator.release", conn=self.number, session=s.id,
                         speaking=s.dropped_speaking)
            self.em.check_at(s, now if s.dead else self.em.handles_end(now))

    def _send(self, at: float, frame: Frame, turn: int = 0, audio_s: float = 0.0) -> None:
        heapq.heappush(self._outbox, Action(at, next(self.em._seq), frame, turn=turn,
                                            audio_s=audio_s))

    def _close(self, at: float, code: int, reason: str, why: str, **detail: Any) -> None:
        if self.closing:
            return
        self.closing = True
        reason = close_reason(reason)
        self.em.emit("emulator.close", conn=self.number, code=code, reason=reason, why=why, **detail)
        heapq.heappush(self._outbox, Action(at, next(self.em._seq), None, code, reason))

    def _bug(self, now: float, exc: Exception, handling: str) -> None:
        """An exception no input should cause: logged with its traceback, and the connection
        closed 1011 with a reason no behaviour uses, in place of whatever was due."""
        log.error("emulator bug on connection %d, handling %s", self.number, handling, exc_info=exc)
        self._outbox.clear()
        self._thinking = None
        self.closing = False
        self._close(now, 1011, EMULATOR_BUG, "emulator bug", error=f"{type(exc).__name__}: {exc}"[:200])

    def _audio_note(self, message: object) -> dict[str, Any]:
        if isinstance(message, RealtimeInput) and message.audio:
            return {"audio_s": round(len(message.audio) / 2 / message.audio_rate, 4)}
        return {}

    def _on_setup(self, setup: Setup, now: float) -> None:
        p, em = self.p, self.em
        self.model = served_model(p, setup.model)
        if self.model is None:
            self._close(now + em.draw(p.invalid_argument_s), 1008,
                        p.unknown_model.replace("{model}", setup.model), "unknown model")
            return
        if setup.transparent and not p.transparent_resumption:
            self._close(now + em.draw(p.invalid_argument_s), 1007, TRANSPARENT_REFUSED,
                        "transparent resumption")
            return
        refused = [m for m in setup.modalities if m not in self.model.modalities]
        if refused:
            self._close(now + em.draw(p.invalid_argument_s), 1007,
                        MODALITIES_REFUSED.format(modalities=", ".join(refused)),
                        f"{', '.join(refused)} modality")
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
        session = em.sessions.get(setup.handle)
        # Asked first: a connection held past its TCP's end may be reaped now, killing the handle.
        holder = session.holder if session is not None else None
        held = holder is not None and holder.holds(now)
        if session is None and setup.handle not in em.dead_handles:
            self._close(now + em.draw(p.invalid_argument_s), 1007, INVALID_ARGUMENT,
                        "unknown handle")
            return
        if session is None or em.expired(session, now):
            self._refuse_dead_handle(now)
            return
        why = None
        if held and holder is not None:
            why = f"the old connection {holder.number} is still " + (
                "held (its TCP gave up)" if holder.closed else "open")
        elif (session.dropped_at is not None and not session.dropped_speaking
              and session.dropped_at - session.last_activity <= em.scaled(p.release_after_activity_s)
              and now - session.dropped_at < em.scaled(p.release_window_s)):
            why = f"idle drop {now - session.dropped_at:.3f}s ago"
        if why is not None:
            em.emit("emulator.resume_refused", conn=self.number, session=session.id, why=why)
            self._close(now + em.draw(p.refusal_s), 1011, INTERNAL_ERROR, f"resume refused: {why}")
            return
        em.emit("emulator.resumed", conn=self.number, session=session.id)
        session.mind.declared |= {f.name: f.behavior for f in setup.functions}
        session.setup = replace(session.setup, resumption=setup.resumption, handle=setup.handle)
        self._attach(session, setup, now, now + em.draw(p.resumed_setup_complete_s),
                     p.resumed_resumption_update_s)

    def _refuse_dead_handle(self, now: float) -> None:
        """S5: a reaped or expired session's handle is refused 1011, or left unanswered."""
        if self.em.rng.random() < self.p.dead_handle_silent:
            self._silent = True
            self.em.emit("emulator.resume_refused", conn=self.number, why="dead handle",
                         answered=False)
            return
        self.em.emit("emulator.resume_refused", conn=self.number, why="dead handle")
        self._close(now + self.em.draw(self.p.refusal_s), 1011, INTERNAL_ERROR,
                    "resume refused: dead handle")

    def _attach(self, session: Session, setup: Setup, now: float, ready_at: float,
                update_span: tuple[float, float]) -> None:
        self.session = session
        session.holder = self
        session.dropped_at = None
        self._vad = None if setup.vad.disabled else Vad(
            silence_ms=setup.vad.silence_duration_ms or self.p.vad_silence_ms,
            prefix_padding_ms=setup.vad.prefix_padding_ms or self.p.vad_prefix_padding_ms,
            start_sensitivity=setup.vad.start_sensitivity, end_sensitivity=setup.vad.end_sensitivity)
        complete: Frame = {}
        if self.p.session_id_in_setup_complete:
            complete = {"sessionId": session.id}
        self._send(ready_at, {"setupComplete": complete})
        if setup.resumption:
            update: Frame = {"newHandle": self.em.new_handle(session), "resumable": True}
            if setup.transparent:
                update["lastConsumedClientMessageIndex"] = str(session.consumed)
            self._send(ready_at + self.em.draw(update_span), {"sessionResumptionUpdate": update})
        if session.cut_speech:
            self.em.emit("emulator.repeat", conn=self.number, text=session.cut_speech)
            self._turn += 1
            self._speak(session.cut_speech, ready_at + self.em.draw(self.p.tool_reply_s),
                        self._turn)
            session.cut_speech = None

    # Turns.

    def _on_client_content(self, msg: ClientContent, now: float) -> None:
        """Turns join the conversation; `turnComplete` ends the user's turn (T7), with the words
        of the parts sent before it."""
        assert self.session is not None
        self._say(msg.turns)
        words = any(role == "user" and not is_placeholder(text) for role, text in msg.turns)
        if not msg.turn_complete:
            self._turn_open = self._turn_open or words
            if self._answer_owed:
                self._held_back += len(msg.turns)
            return
        self._turn_ends(words or self._turn_open, now, now + self.em.draw(self.p.reply_s))

    def _on_realtime(self, msg: RealtimeInput, now: float) -> None:
        assert self.session is not None
        if msg.text is not None:
            # Text input ends a turn as `clientContent` does, with the same latency.
            self._say([("user", msg.text)])
            self._turn_ends(not is_placeholder(msg.text), now, now + self.em.draw(self.p.reply_s))
        if msg.activity_start or msg.activity_end:
            if self._vad is not None:
                raise ProtocolError("Explicit activity control is not supported when automatic "
                                    "activity detection is enabled.")
            if msg.activity_start:
                self._manual_audio = Utterance()
                self._user_starts_speaking(now)
            if msg.activity_end and self._manual_audio is not None:
                utterance, self._manual_audio = self._manual_audio, None
                self._end_of_speech(utterance, now)
        if msg.audio:
            pcm = resample(np.frombuffer(msg.audio, dtype="<i2").astype(np.int16), msg.audio_rate,
                           RATE_IN)
            if self._vad is None:
                if self._manual_audio is not None:
                    self._manual_audio.add(pcm)
            else:
                for event in self._vad.feed(pcm):
                    self.em.emit("emulator.vad", conn=self.number, kind=event.kind,
                                 audio_s=round(event.audio_s, 3))
                    if event.kind == "start":
                        self._on_speech_start(now)
                    else:
                        self._end_of_speech(self._vad.take_utterance(), now)
        if (msg.audio_stream_end and self._vad is not None and self._vad.speaking
                and self.p.audio_stream_end_ends_turn):
            self._vad.speaking = False
            self._end_of_speech(self._vad.take_utterance(), now)

    def _on_speech_start(self, now: float) -> None:
        self._user_starts_speaking(now)
        if self.p.voice_activity_events:
            self._send(now + self.em.draw(self.p.activity_start_s),
                       {"voiceActivity": {"voiceActivityType": "ACTIVITY_START"}})

    def _end_of_speech(self, utterance: Utterance, now: float) -> None:
        assert self.session is not None
        audio = utterance.samples()
        heard = self.em.registry.recognise(audio)
        seconds = len(audio) / RATE_IN
        text = heard if heard is not None else f"[speech {seconds:.1f}s]"
        dropped = {"dropped_s": round(utterance.dropped / RATE_IN, 3)} if utterance.dropped else {}
        self.em.emit("emulator.heard", conn=self.number, audio_s=round(seconds, 3),
                     recognised=heard is not None, text=text, **dropped)
        at = now + self.em.draw(self.p.turn_end_s)
        if self.session.setup.input_transcription:
            self._send(at, {"serverContent": {"inputTranscription": {"text": text,
                                                                     "finished": True}}})
        self._say([("user", text)])
        self._user_speaking = self._turn_open = False
        self._owe_answer(at)

    def _user_starts_speaking(self, now: float) -> None:
        """Barge-in (T4): the model's turn is cut, and its next answer waits for the end of
        the user's turn, as for words sent as text."""
        self._user_speaking = True
        self._interrupt(now)
        self._put_off_answer()

    def _say(self, turns: Iterable[tuple[str, str]]) -> None:
        """Turns join the conversation, which forgets its oldest past CONTEXT_CHARS."""
        self._remember(lambda mind: mind.say(turns))

    def _remember(self, add: Callable[[Mind], None]) -> None:
        """`add` something to the session's mind, telling when that made it forget."""
        assert self.session is not None
        mind = self.session.mind
        before = mind.dropped_chars
        add(mind)
        if mind.dropped_chars > before:
            self.em.emit("emulator.context_trimmed", conn=self.number,
                         chars=mind.dropped_chars - before)

    def _turn_ends(self, said: bool, now: float, answer_at: float) -> None:
        """The user's turn ended at `now` (clientContent or realtimeInput.text). Words cut the
        model's turn under way (T7) and are answered at `answer_at`; a nudge (nothing said) only
        gets an answer if none is due or under way."""
        self._turn_open = False
        if said:
            self._interrupt(now)
        elif self._thinking is not None or self._model_turn_end > now or self._user_speaking:
            self.em.emit("emulator.nudge", conn=self.number, why="an answer is under way")
            return
        self._owe_answer(answer_at)

    def _owe_answer(self, at: float) -> None:
        """A user turn ended: everything said until now is answered at `at`."""
        self._answer_owed = True
        self._held_back = 0
        self._answer_at(at)

    def _answer_at(self, at: float) -> None:
        """One answer at a time: one not yet begun moves to `at`, and then answers everything
        said and every tool result come until then."""
        self._put_off_answer()
        self._thinking = Action(at, next(self.em._seq), think=True)
        heapq.heappush(self._outbox, self._thinking)

    def _put_off_answer(self) -> None:
        """The answer due is dropped (until the user's turn ends, which sets a new one)."""
        if self._thinking is not None and self._thinking in self._outbox:
            self._outbox.remove(self._thinking)
            heapq.heapify(self._outbox)
        self._thinking = None

    def _think(self, at: float) -> None:
        """The model takes its turn, once its own turn has ended and the user is not speaking:
        first about the tool results it has not spoken of (T2), then, as the next turn, the
        answer it owes the user."""
        assert self.session is not None
        self._thinking = None
        if self._user_speaking:
            return  # the end of the user's turn sets the next answer
        if self._model_turn_end > at:
            self._answer_at(self._model_turn_end)
            return
        mind = self.session.mind
        if self._results:
            results, self._results = self._results, []
            reply = Reply.joined([self.em.brain.on_result(call, mind) for call in results])
            self.em.emit("emulator.answer", conn=self.number, parts=0, results=len(results),
                         calls=[c.name for c in reply.calls], speech=reply.speech)
            self._respond(reply, at, before_last=mind.waiting())  # the user's parts still wait
            if self._answer_owed:
                self._answer_at(self._model_turn_end)
            return
        if not self._answer_owed:
            return
        held, self._answer_owed, self._held_back = self._held_back, False, 0
        parts = len(mind.unanswered(held))
        answer = self.em.brain.on_turn(mind, held)
        if answer is None:
            self.em.emit("emulator.nudge", conn=self.number, why="nothing unanswered")
            return
        self.em.emit("emulator.answer", conn=self.number, parts=parts, results=0,
                     calls=[c.name for c in answer.calls], speech=answer.speech)
        self._respond(answer, at, before_last=held)

    def _interrupt(self, now: float) -> None:
        """Barge-in: the model's turn still playing is cut (T4); BLOCKING calls are dropped (T5)."""
        if self._speaking_until <= now:
            return
        self._outbox = [a for a in self._outbox if a.turn == 0]
        heapq.heapify(self._outbox)
        self._speaking_until = now
        self._model_turn_end = now + self.em.scaled(self.em.rng.uniform(0.002, 0.007))
        self._send(now, {"serverContent": {"interrupted": True}})
        self._send(self._model_turn_end, {"serverContent": {"turnComplete": True}})
        assert self.session is not None
        mind = self.session.mind
        mind.calls = [c for c in mind.calls if c.non_blocking or c.result is not None]

    def _on_tool_response(self, msg: ToolResponse, now: float) -> None:
        assert self.session is not None
        mind = self.session.mind
        for response in msg.responses:
            call = next((c for c in mind.calls if c.id == response.id), None)
            if call is None or call.result is not None:
                self.em.emit("emulator.tool_response_ignored", conn=self.number, id=response.id)
                continue
            call.result = kept_result(response.response)
            self.em.emit("emulator.tool_response", conn=self.number, id=call.id, name=call.name)
            self._results.append(call)
        if self._results:
            # T2: speech 0.5-0.8 s after the response, or with the answer already due.
            at = now + self.em.draw(self.p.tool_reply_s)
            self._answer_at(min(at, self._thinking.at) if self._thinking is not None else at)

    def _respond(self, reply: Reply, at: float, before_last: int = 0) -> None:
        """The model's turn from `at`, kept in the conversation before the last `before_last`
        turns (the user's parts it does not answer)."""
        assert self.session is not None
        said = [f"{c.name}({', '.join(f'{k}={v}' for k, v in c.args.items())})" for c in reply.calls]
        self._remember(lambda mind: mind.add_model_turn(
            " ".join([*said, reply.speech or ""]).strip(), before_last))
        self._turn += 1
        turn = self._turn
        tail = self.p.turn_tail_s
        if reply.calls:
            calls = []
            for planned in reply.calls:
                call_id = f"function-call-{self.em.rng.getrandbits(64):016x}"
                record = CallRecord(call_id, planned.name, dict(planned.args),
                                    non_blocking=self._behavior(planned.name) == "NON_BLOCKING")
                self.session.mind.calls.append(record)
                calls.append({"id": call_id, "name": planned.name, "args": dict(planned.args)})
            self._send(at, {"toolCall": {"functionCalls": calls}}, turn)
            if reply.speech is None:
                self._finish_turn(at + self.em.draw(tail), turn, 0)
                return
            at += self.em.draw(tail)
        if reply.speech is not None:
            self._speak(reply.speech, at, turn)

    def _behavior(self, name: str) -> str:
        """A declared function's behaviour; without one, the model's default."""
        assert self.session is not None
        behavior = self.session.mind.declared.get(name)
        if behavior is not None:
            return behavior
        return self.model.default_behavior if self.model is not None else "BLOCKING"

    def _speak(self, text: str, at: float, turn: int) -> None:
        assert self.session is not None
        setup = self.session.setup
        if "AUDIO" not in setup.modalities:
            self._send(at, {"serverContent": {"modelTurn": {"role": "model",
                                                            "parts": [{"text": text}]}}}, turn)
            self._finish_turn(at, turn, len(text.split()))
            return
        pcm = synthesise(text, RATE_OUT)
        chunk = RATE_OUT * self.p.audio_chunk_ms // 1000
        chunk_s = self.p.audio_chunk_ms / 1000
        if setup.output_transcription:
            self._send(at, {"serverContent": {"outputTranscription": {"text": text}}}, turn)
        for i, start in enumerate(range(0, len(pcm), chunk)):
            part = pcm[start : start + chunk]
            data = base64.b64encode(part.astype("<i2").tobytes()).decode()
            self._send(at + self.em.scaled(i * chunk_s / self.p.audio_speedup), {"serverContent": {
                "modelTurn": {"role": "model", "parts": [{"inlineData": {
                    "mimeType": f"audio/pcm;rate={RATE_OUT}", "data": data}}]}}},
                turn, audio_s=len(part) / RATE_OUT)
        duration = len(pcm) / RATE_OUT
        self._speech = (text, at, at + self.em.scaled(duration))
        generated = at + self.em.scaled(duration / self.p.audio_speedup)
        self._send(generated, {"serverContent": {"generationComplete": True}}, turn)
        playback_end = at + self.em.scaled(duration)
        self._speaking_until = playback_end
        self._finish_turn(playback_end, turn, len(text.split()), generation_done=True)

    def _finish_turn(self, at: float, turn: int, words: int, generation_done: bool = False) -> None:
        if not generation_done:
            self._send(at, {"serverContent": {"generationComplete": True}}, turn)
        self._model_turn_end = max(self._model_turn_end, at)
        prompt = 40 + 10 * self._turn
        response = max(1, words * 2)
        usage: Frame = {"promptTokenCount": prompt, "totalTokenCount": prompt + response}
        usage["candidatesTokenCount" if self.api == "vertex" else "responseTokenCount"] = response
        # The turn's usage rides on its turnComplete (frameworks read it there).
        self._send(at, {"serverContent": {"turnComplete": True}, "usageMetadata": usage}, turn)


def kept_result(response: dict[str, Any]) -> dict[str, Any]:
    """What the model keeps of a tool's result for the session's life: all of a small one, the
    status and error of a big one (a response may be a 16 MiB frame)."""
    if len(json.dumps(response)) <= RESULT_KEPT_BYTES:
        return response
    return {k: str(response[k])[:200] for k in ("status", "error") if k in response}


def _unheard(text: str, start: float, end: float, now: float) -> str:
    """The part of a speech a drop at `now` cut, from two words before the cut (R6: the cut
    speech is partly repeated)."""
    words = text.split()
    played = (now - start) / (end - start) if end > start else 0.0
    heard = int(max(0.0, min(1.0, played)) * len(words))
    return " ".join(words[max(0, heard - 2):])
