"""Turn-taking on one connection: what the user says, and when and how the model answers.

The user's turn ends with `turnComplete` (T7), with text input, or with the end of speech (VAD on
samples, or activityEnd); the model answers once its own turn has ended and the user is not
speaking, first about tool results it has not spoken of (T2). Speech from the user cuts the
model's turn still playing (barge-in, T4) and drops its BLOCKING calls (T5). A tool's result is
kept whole if small, else its status and error (RESULT_KEPT_BYTES).
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterable
from typing import Any, Protocol

import numpy as np

from faultlab.emulator.audio import TranscriptRegistry, Utterance, Vad
from faultlab.emulator.brain import Brain, CallRecord, Mind, Reply, is_placeholder
from faultlab.emulator.messages import Call, Encoder, Frame, FunctionResults, Input, Usage, UserContent
from faultlab.emulator.outbox import Action, Outbox
from faultlab.emulator.personality import Personality, ServedModel
from faultlab.emulator.refusals import ProtocolError
from faultlab.emulator.sessions import Session
from faultlab.events import Announcement
from faultlab.speech import RATE_IN, RATE_OUT, resample, synthesise
from faultlab.vocabulary.server import (
    EmulatorAnswer,
    EmulatorContextTrimmed,
    EmulatorHeard,
    EmulatorNudge,
    EmulatorRepeat,
    EmulatorToolResponse,
    EmulatorToolResponseIgnored,
    EmulatorVad,
)

Emit = Callable[..., None]
RESULT_KEPT_BYTES = 4096


class Shared(Protocol):
    """What the connections of one emulator share (its `Emulator`), as turn-taking uses it."""

    personality: Personality
    brain: Brain
    registry: TranscriptRegistry
    rng: random.Random

    def announce(self, what: Announcement) -> None: ...

    def scaled(self, seconds: float) -> float: ...

    def draw(self, span: tuple[float, float]) -> float: ...


class Turns:
    """The turns of one connection's conversation, from its setup on: the user's, ended by what
    the client sends, and the model's, scheduled in the connection's `outbox`."""

    def __init__(self, emulator: Shared, outbox: Outbox, encoder: Encoder, session: Session,
                 model: ServedModel | None, vad: Vad | None, number: int) -> None:
        self.em = emulator
        self.p = emulator.personality
        self.outbox = outbox
        self.encoder = encoder
        self.session = session
        self.model = model
        self.number = number  # the connection's, for the events
        self._vad = vad
        self._manual_audio: Utterance | None = None
        self._turn = 0
        self._speaking_until = 0.0
        self._generated_at = 0.0  # when the model has produced all of its turn under way
        self._speech_heard_at = 0.0  # when the server said it heard the user start speaking
        self.ready_at = 0.0  # when the session is ready: nothing is sent before (the connection's)
        self._speech: tuple[str, float, float] | None = None  # text, start, end of playback
        # The model's next answer, when due (an action in the outbox); whether it owes the user
        # an answer (a user turn ended), and how many turns came after that end (clientContent
        # with turnComplete false: for the next turn); tool results it has not spoken of;
        # whether the user is speaking (VAD or activityStart), or has sent parts with words and
        # no turnComplete yet; when the model's turn under way ends.
        self._thinking: Action | None = None
        self._answer_owed = False
        self._held_back = 0
        self._results: list[CallRecord] = []
        self._user_speaking = False
        self._turn_open = False
        self._model_turn_end = 0.0

    def _send(self, at: float, frames: list[Frame], turn: int = 0, audio_s: float = 0.0) -> None:
        at = max(at, self.ready_at)  # nothing before the session is ready
        for frame in frames:
            self.outbox.send(at, frame, turn, audio_s)

    def speaking(self, now: float) -> bool:
        """Whether the model's speech is still playing at `now`."""
        return self._speaking_until > now

    def unheard(self, now: float) -> str | None:
        """What of the model's last speech a drop at `now` cut (None: no speech yet)."""
        return _unheard(*self._speech, now) if self._speech is not None else None

    def cancel(self) -> None:
        """The connection ends: the answer due goes with everything else in the outbox."""
        self._thinking = None

    def repeat(self, text: str, at: float) -> None:
        """Speak again, at `at`, what a drop cut short (R6)."""
        self.em.announce(EmulatorRepeat(self.number, text))
        self._turn += 1
        self._speak(text, at, self._turn)

    def set_vad(self, vad: Vad | None) -> None:
        """The client changed the session's turn detection (what was heard so far is dropped)."""
        self._vad = vad
        self._manual_audio = None
        self._user_speaking = False

    def on_client_content(self, msg: UserContent, now: float) -> None:
        """Turns join the conversation; `turnComplete` ends the user's turn (T7), with the words
        of the parts sent before it."""
        self._say(msg.turns)
        words = any(role == "user" and not is_placeholder(text) for role, text in msg.turns)
        if not msg.turn_complete:
            self._turn_open = self._turn_open or words
            if self._answer_owed:
                self._held_back += len(msg.turns)
            return
        self._turn_ends(words or self._turn_open, now, now + self.em.draw(self.p.reply_s))

    def on_realtime(self, msg: Input, now: float) -> None:
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
                if self._manual_audio is None and msg.buffered:
                    self._manual_audio = Utterance()
                if self._manual_audio is not None:
                    self._manual_audio.add(pcm)
            else:
                for event in self._vad.feed(pcm):
                    self.em.announce(EmulatorVad(self.number, event.kind,
                                                 round(event.audio_s, 3)))
                    if event.kind == "start":
                        self._on_speech_start(now)
                    else:
                        self._end_of_speech(self._vad.take_utterance(), now)
        if (msg.audio_stream_end and self._vad is not None and self._vad.speaking
                and self.p.audio_stream_end_ends_turn):
            self._vad.speaking = False
            self._end_of_speech(self._vad.take_utterance(), now)
        if msg.clear:
            self._manual_audio = None
            self._user_speaking = False
            if self._vad is not None:
                self._vad.speaking = False
                self._vad.take_utterance()
        if msg.commit:
            self._commit(now)

    def _commit(self, now: float) -> None:
        """The client makes the audio it sent its turn (OpenAI's input_audio_buffer.commit);
        answered when asked."""
        utterance = None
        if self._vad is None:
            utterance, self._manual_audio = self._manual_audio, None
        elif self._vad.speaking:
            self._vad.speaking = False
            utterance = self._vad.take_utterance()
        if utterance is None or len(utterance.samples()) < RATE_IN // 10:
            raise ProtocolError("Error committing input audio buffer: buffer too small. Expected "
                                "at least 100ms of audio.",
                                error_code="input_audio_buffer_commit_empty")
        self._end_of_speech(utterance, now, answer=False)

    def active(self, now: float) -> bool:
        """Whether an answer is due or being produced (or the client was told one is)."""
        return (self._thinking is not None or self._generated_at > now
                or self.encoder.responding)

    def on_respond(self, now: float) -> None:
        """The client asks for an answer now (OpenAI's response.create): about the function
        results not spoken of, else about the conversation."""
        if self.active(now):
            raise ProtocolError("Conversation already has an active response in progress. Wait "
                                "until the response is finished before creating a new one.",
                                error_code="conversation_already_has_active_response")
        if self._results:
            self._answer_at(now + self.em.draw(self.p.tool_reply_s))
            return
        self._turn_ends(True, now, now + self.em.draw(self.p.reply_s))

    def on_cancel(self, now: float) -> None:
        """The client cuts the answer under way (OpenAI's response.cancel)."""
        if not self.active(now):
            raise ProtocolError("Cancellation failed: no active response found",
                                error_code="response_cancel_not_active")
        begun = self._generated_at > now
        self._put_off_answer()
        self._answer_owed = False
        if begun:
            self._cut(now, by_client=True)
        else:
            self._send(now, self.encoder.withdrawn(by_client=True))

    def _on_speech_start(self, now: float) -> None:
        self._user_starts_speaking(now)
        if self.p.voice_activity_events:
            self._speech_heard_at = now + self.em.draw(self.p.activity_start_s)
            self._send(self._speech_heard_at, self.encoder.speech_started())

    def _end_of_speech(self, utterance: Utterance, now: float, answer: bool = True) -> None:
        audio = utterance.samples()
        heard = self.em.registry.recognise(audio)
        seconds = len(audio) / RATE_IN
        text = heard if heard is not None else f"[speech {seconds:.1f}s]"
        dropped = round(utterance.dropped / RATE_IN, 3) if utterance.dropped else None
        self.em.announce(EmulatorHeard(self.number, round(seconds, 3), heard is not None, text,
                                       dropped))
        # Not before its start was said (a start and an end may come in one message).
        self._send(max(now, self._speech_heard_at), self.encoder.speech_stopped())
        if not answer:
            self._send(now, self.encoder.input_transcription(text)
                       if self.session.setup.input_transcription else [])
            self._say([("user", text)])
            self._user_speaking = self._turn_open = False
            return
        at = now + self.em.draw(self.p.turn_end_s)
        if self.session.setup.input_transcription:
            self._send(at, self.encoder.input_transcription(text))
        self._say([("user", text)])
        self._user_speaking = self._turn_open = False
        self._owe_answer(at)

    def _user_starts_speaking(self, now: float) -> None:
        """Barge-in (T4): the model's turn is cut, and its next answer waits for the end of
        the user's turn, as for words sent as text."""
        self._user_speaking = True
        self._interrupt(now)
        if self._thinking is not None:
            self._send(now, self.encoder.withdrawn(by_client=False))
        self._put_off_answer()

    def _say(self, turns: Iterable[tuple[str, str]]) -> None:
        """Turns join the conversation, which forgets its oldest past CONTEXT_CHARS."""
        self._remember(lambda mind: mind.say(turns))

    def _remember(self, add: Callable[[Mind], None]) -> None:
        """`add` something to the session's mind, telling when that made it forget."""
        mind = self.session.mind
        before = mind.dropped_chars
        add(mind)
        if mind.dropped_chars > before:
            self.em.announce(EmulatorContextTrimmed(self.number, mind.dropped_chars - before))

    def _turn_ends(self, said: bool, now: float, answer_at: float) -> None:
        """The user's turn ended at `now` (clientContent or realtimeInput.text). Words cut the
        model's turn under way (T7) and are answered at `answer_at`; a nudge (nothing said) only
        gets an answer if none is due or under way."""
        self._turn_open = False
        if said:
            self._interrupt(now)
        elif self._thinking is not None or self._model_turn_end > now or self._user_speaking:
            self.em.announce(EmulatorNudge(self.number, "an answer is under way"))
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
        self._thinking = self.outbox.think(at)

    def _put_off_answer(self) -> None:
        """The answer due is dropped (until the user's turn ends, which sets a new one)."""
        if self._thinking is not None:
            self.outbox.withdraw(self._thinking)
        self._thinking = None

    def think(self, at: float) -> None:
        """The model takes its turn, once its own turn has ended and the user is not speaking:
        first about the tool results it has not spoken of (T2), then, as the next turn, the
        answer it owes the user."""
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
            self.em.announce(EmulatorAnswer(self.number, 0, len(results),
                                            [c.name for c in reply.calls], reply.speech))
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
            self.em.announce(EmulatorNudge(self.number, "nothing unanswered"))
            self._send(at, self.encoder.nothing_to_say())
            return
        self.em.announce(EmulatorAnswer(self.number, parts, 0, [c.name for c in answer.calls],
                                        answer.speech))
        self._respond(answer, at, before_last=held)

    def _interrupt(self, now: float) -> None:
        """Barge-in: the model's turn still playing is cut (T4); BLOCKING calls are dropped (T5)."""
        if self._speaking_until <= now:
            return
        self._cut(now, by_client=False)

    def _cut(self, now: float, by_client: bool) -> None:
        """The model's turn under way ends now: what is left of it is not sent."""
        self.outbox.cut_turns()
        generated = self._generated_at <= now
        self._speaking_until = now
        self._generated_at = min(self._generated_at, now)
        self._model_turn_end = now + self.em.scaled(self.em.rng.uniform(0.002, 0.007))
        self._send(now, self.encoder.interrupted(generated, by_client))
        self._send(self._model_turn_end, self.encoder.turn_complete(None))
        mind = self.session.mind
        mind.calls = [c for c in mind.calls if c.non_blocking or c.result is not None]

    def on_tool_response(self, msg: FunctionResults, now: float) -> None:
        mind = self.session.mind
        for response in msg.responses:
            call = next((c for c in mind.calls if c.id == response.id), None)
            if call is None or call.result is not None:
                self.em.announce(EmulatorToolResponseIgnored(self.number, response.id))
                continue
            call.result = kept_result(response.response)
            self.em.announce(EmulatorToolResponse(self.number, call.id, call.name))
            self._results.append(call)
        if self._results and msg.answer:
            # T2: speech 0.5-0.8 s after the response, or with the answer already due.
            at = now + self.em.draw(self.p.tool_reply_s)
            self._answer_at(min(at, self._thinking.at) if self._thinking is not None else at)

    def _respond(self, reply: Reply, at: float, before_last: int = 0) -> None:
        """The model's turn from `at`, kept in the conversation before the last `before_last`
        turns (the user's parts it does not answer)."""
        said = [f"{c.name}({', '.join(f'{k}={v}' for k, v in c.args.items())})" for c in reply.calls]
        self._remember(lambda mind: mind.add_model_turn(
            " ".join([*said, reply.speech or ""]).strip(), before_last))
        self._turn += 1
        turn = self._turn
        tail = self.p.turn_tail_s
        if reply.calls:
            calls = []
            for planned in reply.calls:
                call_id = self.encoder.call_id(self.em.rng.getrandbits(64))
                record = CallRecord(call_id, planned.name, dict(planned.args),
                                    non_blocking=self._behavior(planned.name) == "NON_BLOCKING")
                self.session.mind.calls.append(record)
                calls.append(Call(call_id, planned.name, dict(planned.args)))
            self._send(at, self.encoder.function_calls(calls), turn)
            if reply.speech is None:
                end = at + self.em.draw(tail)
                self._finish_turn(end, end, turn, 0)
                return
            at += self.em.draw(tail)
        if reply.speech is not None:
            self._speak(reply.speech, at, turn)

    def _behavior(self, name: str) -> str:
        """A declared function's behaviour; without one, the model's default."""
        behavior = self.session.mind.declared.get(name)
        if behavior is not None:
            return behavior
        return self.model.default_behavior if self.model is not None else "BLOCKING"

    def _speak(self, text: str, at: float, turn: int) -> None:
        setup = self.session.setup
        if "AUDIO" not in setup.modalities:
            self._send(at, self.encoder.text(text), turn)
            self._finish_turn(at, at, turn, len(text.split()))
            return
        pcm = synthesise(text, RATE_OUT)
        chunk = RATE_OUT * self.p.audio_chunk_ms // 1000
        chunk_s = self.p.audio_chunk_ms / 1000
        if setup.output_transcription:
            self._send(at, self.encoder.output_transcription(text), turn)
        for i, start in enumerate(range(0, len(pcm), chunk)):
            part = pcm[start : start + chunk]
            self._send(at + self.em.scaled(i * chunk_s / self.p.audio_speedup),
                       self.encoder.audio(part.astype("<i2").tobytes(), RATE_OUT), turn,
                       audio_s=len(part) / RATE_OUT)
        duration = len(pcm) / RATE_OUT
        self._speech = (text, at, at + self.em.scaled(duration))
        generated = at + self.em.scaled(duration / self.p.audio_speedup)
        playback_end = at + self.em.scaled(duration)
        self._speaking_until = playback_end
        self._finish_turn(generated, playback_end, turn, len(text.split()))

    def _finish_turn(self, generated: float, end: float, turn: int, words: int) -> None:
        """The model's turn is all produced at `generated` and over at `end` (its speech has
        played)."""
        usage = Usage(prompt=40 + 10 * self._turn, response=max(1, words * 2))
        self._generated_at = max(self._generated_at, generated)
        self._send(generated, self.encoder.generation_complete(usage), turn)
        self._model_turn_end = max(self._model_turn_end, end)
        self._send(end, self.encoder.turn_complete(usage), turn)


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
