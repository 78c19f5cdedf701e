"""What the emulator's core speaks, whatever the API: the client's messages, parsed into neutral
types by the API's parser, and the server's, which the core asks the API's `Encoder` to spell.

A session opens with a `Setup` (Gemini: the `setup` message; OpenAI: the connection itself), and
from then on the client adds to the conversation (`UserContent`), streams input (`Input`),
answers function calls (`FunctionResults`) and changes the session (`Configure`). Whether a
message asks for an answer is the message's (`turn_complete`, `answer`): Gemini answers a tool's
result unasked, OpenAI waits for `response.create`.

On the server's side the core decides what the model does and when; the encoder turns each of
its moves (a function call, a chunk of audio, the end of a turn ...) into the API's frames, none
or several, built when the move is scheduled.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

Frame = dict[str, Any]


@dataclass(frozen=True)
class FunctionDecl:
    name: str
    behavior: str | None  # BLOCKING, NON_BLOCKING; None: the model's default
    # The declaration as the client sent it, where the API echoes it back (OpenAI's session).
    declaration: Mapping[str, Any] | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Vad:
    """Turn detection on the client's audio (`disabled`: the client marks its turns)."""

    disabled: bool = False
    silence_duration_ms: int | None = None
    prefix_padding_ms: int | None = None
    start_sensitivity: str | None = None
    end_sensitivity: str | None = None


@dataclass(frozen=True)
class Setup:
    """What a session opens with."""

    model: str
    modalities: tuple[str, ...]
    functions: tuple[FunctionDecl, ...]
    resumption: bool
    handle: str | None
    transparent: bool
    vad: Vad
    input_transcription: bool
    output_transcription: bool
    system_instruction: str


@dataclass(frozen=True)
class UserContent:
    """Turns (role, text) that join the conversation; `turn_complete` ends the user's turn."""

    turns: tuple[tuple[str, str], ...]
    turn_complete: bool


@dataclass(frozen=True)
class Input:
    """Streamed input: audio (16-bit PCM at `audio_rate`), its end, text, and the marks of a
    turn the client delimits itself."""

    audio: bytes | None = None
    audio_rate: int = 16000
    audio_stream_end: bool = False
    text: str | None = None
    activity_start: bool = False
    activity_end: bool = False
    # OpenAI's input buffer: with no turn detection, audio is kept until `commit` makes it the
    # user's turn, with no mark of its start.
    buffered: bool = False
    commit: bool = False
    clear: bool = False  # the audio kept so far is dropped (OpenAI's input_audio_buffer.clear)


@dataclass(frozen=True)
class FunctionResponse:
    id: str
    name: str
    response: dict[str, Any]


@dataclass(frozen=True)
class FunctionResults:
    responses: tuple[FunctionResponse, ...]
    answer: bool = True  # the model speaks of them unasked (Gemini), or when asked (OpenAI)


@dataclass(frozen=True)
class Configure:
    """Changes to the session under way: more instructions and functions, and the settings an
    API lets a client change (None: unchanged)."""

    system_instruction: str
    functions: tuple[FunctionDecl, ...]
    modalities: tuple[str, ...] | None = None
    vad: Vad | None = None
    input_transcription: bool | None = None
    # The functions replace the session's (OpenAI's tools), rather than join them (Gemini).
    replace_functions: bool = False


@dataclass(frozen=True)
class Respond:
    """The client asks the model to answer now (OpenAI's response.create)."""


@dataclass(frozen=True)
class Cancel:
    """The client cuts the model's answer under way (OpenAI's response.cancel)."""


@dataclass(frozen=True)
class Other:
    """A message the core has nothing to do with; the encoder may acknowledge it."""


ClientMessage = Setup | UserContent | Input | FunctionResults | Configure | Respond | Cancel | Other


@dataclass(frozen=True)
class Parsed:
    message: ClientMessage
    raw_kind: str  # the kind as the protocol names it (faultlab.protocols)
    # The decoded frame and the client's own id for it, where the API answers by them.
    data: Any = field(default=None, compare=False)
    event_id: str | None = None


@dataclass(frozen=True)
class Call:
    id: str
    name: str
    args: Mapping[str, Any]


@dataclass(frozen=True)
class Usage:
    """The tokens of one model turn."""

    prompt: int
    response: int


class Encoder(ABC):
    """One connection's server frames for the core's moves, in the API's spelling; it may keep
    state (the response under way, its items)."""

    @abstractmethod
    def call_id(self, bits: int) -> str:
        """A new function call's id, from `bits` random bits."""

    @abstractmethod
    def setup_complete(self, session_id: str, setup: Setup) -> list[Frame]:
        """The session is ready for the client."""

    @abstractmethod
    def resumption_update(self, handle: str, consumed: int | None) -> list[Frame]:
        """A new resumption handle (`consumed`: the client messages it covers, when the client
        asked to know)."""

    @abstractmethod
    def go_away(self, time_left_s: float) -> list[Frame]:
        """The connection ends in `time_left_s`."""

    def acknowledge(self, parsed: Parsed, setup: Setup | None) -> list[Frame]:
        """What the server answers at once to a client message the core took (`setup`: the
        session's settings after it)."""
        return []

    def error(self, message: str, code: str, param: str | None,
              event_id: str | None) -> list[Frame]:
        """An error told in-band (the APIs that close on every error tell nothing)."""
        return []

    def expired(self, message: str) -> list[Frame]:
        """The session reached its longest life."""
        return []

    @abstractmethod
    def speech_started(self) -> list[Frame]:
        """The server's VAD heard the user start speaking."""

    def speech_stopped(self) -> list[Frame]:
        """The user's speech ended (VAD or a commit): their turn joins the conversation."""
        return []

    @abstractmethod
    def input_transcription(self, text: str) -> list[Frame]:
        """What the user said, as the server heard it."""

    @abstractmethod
    def function_calls(self, calls: list[Call]) -> list[Frame]:
        """The model calls functions."""

    @abstractmethod
    def text(self, text: str) -> list[Frame]:
        """The model's turn as text."""

    @abstractmethod
    def output_transcription(self, text: str) -> list[Frame]:
        """The words of the speech that follows."""

    @abstractmethod
    def audio(self, pcm: bytes, rate: int) -> list[Frame]:
        """One chunk of the model's speech (16-bit PCM at `rate`)."""

    @abstractmethod
    def generation_complete(self, usage: Usage) -> list[Frame]:
        """The model has produced all of its turn (its speech may still be playing)."""

    @abstractmethod
    def turn_complete(self, usage: Usage | None) -> list[Frame]:
        """The model's turn is over (`usage`: None for a turn cut short)."""

    def nothing_to_say(self) -> list[Frame]:
        """Asked to answer, the model had nothing to say."""
        return []

    @property
    def responding(self) -> bool:
        """Whether the client was told of an answer that has not ended (OpenAI's response
        opened by response.create)."""
        return False

    def withdrawn(self, by_client: bool) -> list[Frame]:
        """An answer due and not begun is dropped: by the client (a cancel), or by the user's
        speech."""
        return []

    @abstractmethod
    def interrupted(self, generated: bool, by_client: bool) -> list[Frame]:
        """The model's turn under way was cut: by the user's speech, or by the client
        (`by_client`); `generated`: all of it had been produced already."""
