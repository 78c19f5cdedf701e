"""Bad input: thousands of malformed setups and frames, hostile values and seeded mutations of
valid frames each end in a close 1007 (1008, 1009) with a reason; none is an emulator bug."""

from __future__ import annotations

import asyncio
import base64
import copy
import functools
import json
import logging
import os
import random
import ssl
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from google.genai import _live_converters
from google.genai.client import Client
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from faultlab.emulator.apis.gemini_parse import parse_frame
from faultlab.emulator.personality import PERSONALITIES
from faultlab.emulator.refusals import ProtocolError
from faultlab.emulator.server import MAX_CLIENT_FRAME
from faultlab.emulator.session import EMULATOR_BUG, Emulator
from faultlab.emulator.strictjson import MAX_DEPTH, MAX_VALUES
from faultlab.emulator.turns import Turns

from .conftest import RunningEmulator
from .test_setup_schema import everything, setup_as_sent

PATH = "/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent"
SETUP = {"setup": {"model": "models/gemini-3.8-live",
                   "generationConfig": {"responseModalities": ["TEXT"]}}}
CASES = 2000
MUTATIONS_SERVED = 600  # through the real server, on top of CASES
MUTATIONS_IN_CORE = 5000
# Sent after a mutated frame: its close says the frame before it was accepted.
SENTINEL = json.dumps({"fuzzSentinel": {}})
ACCEPTED = 'Invalid JSON payload received. Unknown name "fuzzSentinel": Cannot find field.'
SETUP_FIELDS = {"model": "models/gemini-3.8-live", "generationConfig": {"responseModalities": ["TEXT"]},
                "sessionResumption": {}, "inputAudioTranscription": {}, "outputAudioTranscription": {},
                "systemInstruction": {"parts": [{"text": "You book slots."}]},
                "tools": [{"functionDeclarations": [{"name": "book_slot", "behavior": "NON_BLOCKING",
                                                     "parameters": {"type": "OBJECT"}}]}],
                "realtimeInputConfig": {"automaticActivityDetection": {
                    "silenceDurationMs": 800, "startOfSpeechSensitivity": "START_SENSITIVITY_LOW"}}}
TONE = (np.sin(np.arange(1600) / 16000 * 2 * np.pi * 180) * 8000).astype("<i2").tobytes()
AFTER_SETUP = [
    {"realtimeInput": {"audio": {"data": base64.b64encode(TONE).decode(),
                                 "mimeType": "audio/pcm;rate=16000"}}},
    {"realtimeInput": {"mediaChunks": [{"data": base64.b64encode(TONE).decode(),
                                        "mimeType": "audio/pcm"}]}},
    {"realtimeInput": {"text": "Book me the 3pm slot tomorrow"}},
    {"realtimeInput": {"audioStreamEnd": True}},
    {"clientContent": {"turns": [{"role": "user", "parts": [{"text": "Did you book it?"}]}],
                       "turnComplete": True}},
    {"toolResponse": {"functionResponses": [{"id": "function-call-1", "name": "book_slot",
                                             "response": {"status": "committed", "n": [1, 2.5]}}]}},
]
# Placeholders json.dumps cannot write, put in after it.
RAW = {"@NAN@": "NaN", "@INF@": "-Infinity", "@HUGE@": "1e400", "@DIGITS@": "9" * 5000,
       "@DEEP@": "[" * (MAX_DEPTH + 5) + "]" * (MAX_DEPTH + 5)}
JUNK: list[Any] = [None, 0, -1, 1.5, 2**64, True, False, "", "x", "TEXT", "\ud800", "a\udfffb", [],
                   [1, "a"], [{}], {}, {"k": 1}, {"parts": 5}, "audio/pcm;rate=" + "9" * 5000,
                   "-" * 100, *RAW]


def junk(rng: random.Random) -> Any:
    return rng.choice([None, 7, -1.5, True, "x" * rng.randint(0, 40), [1, "a"], {"k": []}])


def bad_setup(rng: random.Random) -> str | bytes:
    """A first frame the service must refuse."""
    valid = json.dumps(SETUP)
    kind = rng.randrange(12)
    if kind == 0:
        return valid[: rng.randint(1, len(valid) - 2)]  # truncated JSON
    if kind == 1:
        return bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 64)))
    if kind == 2:
        return json.dumps(rng.choice([[], [SETUP], 3, "setup", None]))
    if kind == 3:
        return json.dumps({**SETUP, "clientContent": {}})  # two top-level keys
    if kind == 4:
        return json.dumps({f"x{rng.randint(0, 999)}": junk(rng)})  # unknown message
    if kind == 5:
        return json.dumps({"setup": {"model": junk(rng) if rng.random() < 0.5 else ""}})
    if kind == 6:
        return json.dumps({"setup": {**SETUP["setup"], f"bogus{rng.randint(0, 99)}": junk(rng)}})
    if kind == 7:
        return json.dumps({"setup": {**SETUP["setup"], "generationConfig": {
            "responseModalities": rng.choice(["TEXT", 5, [1], {"a": 1}])}}})
    if kind == 8:
        return json.dumps({"setup": {**SETUP["setup"], "sessionResumption": {
            "handle": rng.choice([5, ["h"], {"h": 1}, "not-a-known-handle"])}}})
    if kind == 9:
        return json.dumps({"setup": {**SETUP["setup"], "tools": rng.choice(
            [5, "t", [{"functionDeclarations": [{"behavior": "NON_BLOCKING"}]}]])}})
    if kind == 10:
        return json.dumps({"setup": {**SETUP["setup"], "realtimeInputConfig": {
            "automaticActivityDetection": {"silenceDurationMs": rng.choice(["abc", [1], 1.5])}}}})
    return json.dumps({rng.choice(["realtimeInput", "clientContent", "toolResponse"]): {}})


def bad_frame(rng: random.Random) -> str | bytes:
    """A frame after a good setup that the service must refuse."""
    kind = rng.randrange(10)
    if kind == 0:
        return json.dumps({"realtimeInput": {"audio": {"data": "!!not base64!!" * rng.randint(1, 5),
                                                       "mimeType": "audio/pcm;rate=16000"}}})
    if kind == 1:
        odd = base64.b64encode(bytes(rng.randrange(1, 200, 2))).decode()
        return json.dumps({"realtimeInput": {"audio": {"data": odd, "mimeType": "audio/pcm"}}})
    if kind == 2:
        return json.dumps({"realtimeInput": {"audio": {"data": "AAAA",
                                                       "mimeType": rng.choice(["image/png", 5])}}})
    if kind == 3:
        return json.dumps({"realtimeInput": {f"bogus{rng.randint(0, 9)}": junk(rng)}})
    if kind == 4:
        return json.dumps({"clientContent": {"turns": rng.choice([5, "t", {"a": 1}])}})
    if kind == 5:
        return json.dumps({"toolResponse": {"functionResponses": [{"name": "x", "response": {}}]}})
    if kind == 6:
        return json.dumps(SETUP)  # a second setup
    if kind == 7:
        return json.dumps({"realtimeInput": {"activityStart": {}}})  # automatic VAD is on
    if kind == 8:
        return json.dumps({"realtimeInput": {"text": rng.choice([5, [1], {"a": "b"}, True])}})
    return bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 64)))


def _big(text: str, fill: str) -> str:
    return text.replace('"@BIG@"', fill)


# (id, frame, what its reason says): input errors the hostile-input study found or that its list
# of kinds implies, each refused 1007 with the field named where there is one.
HOSTILE: list[tuple[str, str | bytes, str]] = [
    ("declarations-not-a-list", json.dumps({"setup": {**SETUP["setup"], "tools": [
        {"functionDeclarations": 5}]}}), "'setup.tools[0].function_declarations'"),
    ("behavior-a-number", json.dumps({"setup": {**SETUP["setup"], "tools": [{"functionDeclarations": [
        {"name": "f", "behavior": 5}]}]}}), "function_declarations[0].behavior' (TYPE_ENUM), 5"),
    ("media-chunks-a-number", json.dumps({"realtimeInput": {"mediaChunks": 5}}),
     "'realtime_input.media_chunks'"),
    ("mime-type-a-number", json.dumps({"realtimeInput": {"mediaChunks": [{"mimeType": 5, "data": "AAAA"}]}}),
     "'realtime_input.media_chunks[0].mime_type' (TYPE_STRING), 5"),
    ("rate-of-5000-digits", json.dumps({"realtimeInput": {"audio": {
        "mimeType": "audio/pcm;rate=" + "9" * 5000, "data": "AAAA"}}}), "Unsupported sample rate"),
    ("int-of-5000-digits", _big(json.dumps({"setup": {**SETUP["setup"], "realtimeInputConfig": {
        "automaticActivityDetection": {"silenceDurationMs": "@BIG@"}}}}), "9" * 5000),
     "Number out of range: 999"),
    ("int-past-int32", json.dumps({"setup": {**SETUP["setup"], "realtimeInputConfig": {
        "automaticActivityDetection": {"prefixPaddingMs": 10**12}}}}),
     "automatic_activity_detection.prefix_padding_ms"),
    ("int-past-int64-as-string", json.dumps({"setup": {**SETUP["setup"], "generationConfig": {
        "seed": "9" * 30}}}), "'setup.generation_config.seed' (TYPE_INT64)"),
    ("bool-as-int", json.dumps({"setup": {**SETUP["setup"], "generationConfig": {"seed": True}}}),
     "'setup.generation_config.seed' (TYPE_INT64), true"),
    ("int-as-bool", json.dumps({"clientContent": {"turns": [], "turnComplete": 1}}),
     "'client_content.turn_complete' (TYPE_BOOL), 1"),
    ("nan", '{"setup": {"model": "models/gemini-3.8-live", "generationConfig": {"temperature": NaN}}}',
     "Unexpected token: NaN"),
    ("infinity", '{"realtimeInput": {"audio": {"mimeType": Infinity}}}', "Unexpected token: Infinity"),
    ("number-past-a-double", '{"setup": {"model": "models/gemini-3.8-live", "generationConfig": '
     '{"temperature": 1e400}}}', "Number out of range: 1e400"),
    ("1000-deep", "[" * 1000 + "]" * 1000, f"Nested deeper than {MAX_DEPTH} levels at '[0][0]"),
    ("1000-deep-in-parameters", _big(json.dumps({"setup": {**SETUP["setup"], "tools": [
        {"functionDeclarations": [{"name": "f", "parameters": "@BIG@"}]}]}}),
        '{"a":' * 1000 + "1" + "}" * 1000),
     "levels at 'setup.tools[0].function_declarations[0].parameters.a.a"),
    ("990-deep-in-labels", _big(json.dumps({"setup": {**SETUP["setup"], "labels": "@BIG@"}}),
                                '{"a":' * 990 + '"v"' + "}" * 990), "levels at 'setup.labels.a.a"),
    ("surrogate-in-model", '{"setup": {"model": "models/gemini-3.8-live\\ud800"}}',
     "'setup.model' (TYPE_STRING): a lone surrogate"),
    ("surrogate-in-a-key", '{"setup": {"model": "models/gemini-3.8-live", "\\udc00x": 1}}',
     "at 'setup.\\udc00x' (TYPE_STRING): a lone surrogate"),
    ("surrogate-in-text", '{"clientContent": {"turns": [{"parts": [{"text": "hi \\ud83d"}]}]}}',
     "'client_content.turns[0].parts[0].text' (TYPE_STRING): a lone surrogate"),
    ("surrogate-in-data", '{"toolResponse": {"functionResponses": [{"id": "c", "response": '
     '{"a": ["\\ude00"]}}]}}', "'tool_response.function_responses[0].response.a[0]' (TYPE_STRING)"),
    ("object-for-a-string", json.dumps({"setup": {"model": {}}}),
     "'setup.model' (TYPE_STRING), {...}"),
    ("list-for-a-string", json.dumps({"realtimeInput": {"text": []}}),
     "'realtime_input.text' (TYPE_STRING), [...]"),
    ("string-for-an-object", json.dumps({"setup": {**SETUP["setup"], "generationConfig": "x"}}),
     "'setup.generation_config': expected an object"),
    ("empty-object-for-a-list", json.dumps({"setup": {**SETUP["setup"], "tools": {}}}), "'setup.tools'"),
    ("unknown-enum-name", json.dumps({"setup": {**SETUP["setup"], "generationConfig": {
        "responseModalities": ["SMELL"]}}}),
     "'setup.generation_config.response_modalities[0]' (TYPE_ENUM), \"SMELL\""),
    ("number-in-a-string-map", json.dumps({"setup": {**SETUP["setup"], "labels": {"a": 5}}}),
     "'setup.labels' (TYPE_MESSAGE)"),
    ("too-many-values", '{"realtimeInput": {"mediaChunks": [' + ",".join(["{}"] * (MAX_VALUES + 1)) + "]}}",
     f"More than {MAX_VALUES} values"),
    ("not-utf-8", b'{"setup": {"model": "\xff"}}', "malformed"),
    ("utf-16", '{"setup": {}}'.encode("utf-16"), "malformed"),
]


@pytest.mark.parametrize(("frame", "says"), [case[1:] for case in HOSTILE], ids=[c[0] for c in HOSTILE])
def test_a_hostile_frame_is_refused_1007_naming_its_field(frame: str | bytes, says: str) -> None:
    """Type confusion, numbers out of range, non-JSON numbers, lone surrogates, deep nesting and
    too many values are all input errors: 1007, with the field's path where there is one."""
    with pytest.raises(ProtocolError) as info:
        parse_frame(frame)
    assert info.value.code == 1007
    assert says in info.value.reason
    assert len(info.value.reason.encode()) <= 123


def test_limits_are_on_the_line_not_before_it() -> None:
    """MAX_DEPTH levels parse and one more is refused; MAX_VALUES counts values, not the commas
    and brackets inside strings."""
    def nested(levels: int) -> str:
        return '{"clientContent": {"turns": [{"parts": [{"functionCall": {"args": ' + (
            '{"a": ' * (levels - 7) + "1" + "}" * (levels - 7)) + "}}]}]}}"

    parse_frame(nested(MAX_DEPTH))
    with pytest.raises(ProtocolError, match="Nested deeper"):
        parse_frame(nested(MAX_DEPTH + 1))
    text = "{[,]} " * (MAX_VALUES // 2)
    parsed = parse_frame(json.dumps({"clientContent": {"turns": [{"parts": [{"text": text}]}]}}))
    assert parsed.raw_kind == "client_content"


@functools.cache
def sdk_setup() -> dict[str, Any]:
    """The setup the SDK sends with every field of LiveConnectConfig set, made one the emulator
    accepts (TEXT, no handle to resume)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        frame, _ = setup_as_sent(Client(api_key="k"), _live_converters._LiveConnectParameters_to_mldev,
                                 everything())
    setup = json.loads(frame)
    for key in ("responseModalities", "response_modalities"):
        setup["setup"]["generationConfig"][key] = ["TEXT"]
    del setup["setup"]["sessionResumption"]["handle"]
    return dict(setup)


def _nodes(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """The path of every value in a JSON tree (the root is ())."""
    out = [path]
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else []
    for key, sub in items:
        out += _nodes(sub, (*path, key))
    return out


def mutate(rng: random.Random, frame: dict[str, Any]) -> str | bytes:
    """A valid frame with one to three seeded changes: a value replaced by junk of another type,
    a key dropped, renamed or respelled, a value wrapped, a second message, or the text cut."""
    data = copy.deepcopy(frame)
    for _ in range(rng.randint(1, 3)):
        paths = _nodes(data)[1:]
        if not paths:  # the message itself was dropped
            break
        path = rng.choice(paths)
        parent = functools.reduce(lambda node, key: node[key], path[:-1], data)
        key = path[-1]
        op = rng.random()
        if op < 0.5:
            parent[key] = copy.deepcopy(rng.choice(JUNK))
        elif op < 0.6 and isinstance(parent, dict):
            del parent[key]
        elif op < 0.7 and isinstance(parent, dict):
            parent[key + rng.choice(["x", "_", "Id"])] = parent.pop(key)
        elif op < 0.8 and isinstance(parent, dict):
            spelled = key.lower() if rng.random() < 0.5 else "".join(
                part.capitalize() if i else part for i, part in enumerate(key.split("_")))
            parent[spelled] = parent.pop(key)
        elif op < 0.97:
            parent[key] = rng.choice([[parent[key]], {"value": parent[key]}])
        else:
            data[rng.choice(["setup", "clientContent", "realtimeInput"])] = {}
    text = json.dumps(data)
    for placeholder, raw in RAW.items():
        text = text.replace(json.dumps(placeholder), raw)
    if rng.random() < 0.05:
        text = text[: rng.randrange(1, len(text))]
    return text if rng.random() < 0.9 else text.encode()


def mutations(rng: random.Random, n: int) -> list[tuple[str | bytes, bool]]:
    """(frame, sent after a good setup) for `n` mutations of valid setups and later frames."""
    setups = [SETUP, {"setup": SETUP_FIELDS}, sdk_setup()]
    out = []
    for _ in range(n):
        after = rng.random() < 0.5
        out.append((mutate(rng, rng.choice(AFTER_SETUP if after else setups)), after))
    return out


def test_mutated_frames_in_the_core_are_refused_or_accepted_never_a_bug(
        caplog: pytest.LogCaptureFixture) -> None:
    """Thousands of mutations of valid frames, on the sans-I/O core: each is accepted or closed
    1007/1008, none raises, and no emulator bug is logged."""
    events: list[dict[str, Any]] = []
    em = Emulator(PERSONALITIES["gemini-dev-2026-10"], seed=3,
                  emit=lambda name, **f: events.append({"event": name, **f}))
    good_setup = json.dumps({"setup": SETUP_FIELDS})
    codes: list[int | None] = []
    with caplog.at_level(logging.ERROR):
        for i, (frame, after) in enumerate(mutations(random.Random(1129), MUTATIONS_IN_CORE)):
            t = i * 1000.0
            conn = em.connect(t)
            if after:
                conn.receive(good_setup, t)
            conn.receive(frame, t + 0.5)
            closes = [a.code for a in conn.poll(t + 60) if a.frame is None]
            codes.append(closes[0] if closes else None)
            conn.peer_closed(t + 61)
    assert not [e for e in events if e.get("why") == "emulator bug"]
    assert not caplog.records
    assert set(codes) <= {1007, 1008, None}, set(codes)
    assert codes.count(1007) > MUTATIONS_IN_CORE // 2 and codes.count(None) > MUTATIONS_IN_CORE // 20


def test_an_emulator_bug_is_logged_and_closed_1011_with_its_own_reason(
        caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    """A programming error while handling a frame (or a timer) is not a behaviour: its traceback
    is logged and the connection closed 1011 with EMULATOR_BUG, `why` "emulator bug"."""
    events: list[dict[str, Any]] = []
    em = Emulator(PERSONALITIES["gemini-dev-2026-10"], seed=3,
                  emit=lambda name, **f: events.append({"event": name, **f}))
    conn = em.connect(0.0)
    conn.receive(json.dumps(SETUP), 0.0)

    def broken(*args: Any) -> None:
        raise TypeError("a bug")

    monkeypatch.setattr(Turns, "on_client_content", broken)
    with caplog.at_level(logging.ERROR):
        conn.receive(json.dumps(AFTER_SETUP[4]), 1.0)
        out = conn.poll(1.0)
    assert [(a.code, a.reason) for a in out if a.frame is None] == [(1011, EMULATOR_BUG)]
    (closed,) = [e for e in events if e["event"] == "emulator.close"]
    assert closed["why"] == "emulator bug" and closed["error"] == "TypeError: a bug"
    (record,) = caplog.records
    assert record.exc_info is not None and "handling a client frame" in record.getMessage()

    # In a timer: the model's answer raising.
    conn = em.connect(10.0)
    conn.receive(json.dumps(SETUP), 10.0)
    conn.receive(json.dumps(AFTER_SETUP[2]), 10.5)
    monkeypatch.setattr(em.brain, "on_turn", broken)
    with caplog.at_level(logging.ERROR):
        out = conn.poll(20.0)
    assert [(a.code, a.reason) for a in out if a.frame is None] == [(1011, EMULATOR_BUG)]
    assert conn.closed and "handling a timer" in caplog.records[-1].getMessage()


async def one_case(url: str, ctx: ssl.SSLContext, frame: str | bytes,
                   after_setup: bool, sentinel: bool = False) -> tuple[int | None, str]:
    """Send `frame` (after a good setup), then the sentinel if asked; the close it ends in."""
    async with asyncio.timeout(10):
        async with connect(url, ssl=ctx, additional_headers={"x-goog-api-key": "k"},
                           compression=None, max_size=None) as ws:
            if after_setup:
                await ws.send(json.dumps(SETUP))
                assert "setupComplete" in json.loads(await ws.recv())
            try:
                await ws.send(frame)
                if sentinel:
                    await ws.send(SENTINEL)
                while True:
                    await ws.recv()
            except ConnectionClosed:
                pass
            return ws.close_code, ws.close_reason or ""


def test_malformed_input_always_ends_in_a_close_with_a_reason(
        start_emulator: Callable[..., RunningEmulator]) -> None:
    """Every malformed setup or frame, hostile value and mutation of a valid frame is closed (1007
    for bad requests, 1009 past the size limit) with a reason, or accepted; the emulator never
    crashes, hangs or logs a traceback, and a good session works afterwards."""
    emulator = start_emulator(time_scale=0.01)
    url = emulator.env["GOOGLE_GEMINI_BASE_URL"].replace("https", "wss") + PATH
    ctx = ssl.create_default_context(cafile=os.environ["SSL_CERT_FILE"])
    rng = random.Random(20261129)
    cases = [(bad_setup(rng), False, False) for _ in range(CASES // 2)]
    cases += [(bad_frame(rng), True, False) for _ in range(CASES // 2)]
    cases += [(frame, not _is_setup(frame), False) for _, frame, _ in HOSTILE]
    cases.append((json.dumps({"realtimeInput": {"text": "a" * MAX_CLIENT_FRAME}}), True, False))
    cases += [(frame, after, True) for frame, after in mutations(rng, MUTATIONS_SERVED)]

    async def scenario() -> list[tuple[int | None, str]]:
        limit = asyncio.Semaphore(16)

        async def guarded(frame: str | bytes, after: bool, sentinel: bool) -> tuple[int | None, str]:
            async with limit:
                return await one_case(url, ctx, frame, after, sentinel)

        results = await asyncio.gather(*(guarded(*case) for case in cases))
        # And the service still serves a good session.
        async with connect(url, ssl=ctx, additional_headers={"x-goog-api-key": "k"}) as ws:
            await ws.send(json.dumps(SETUP))
            assert "setupComplete" in json.loads(await ws.recv())
            await ws.send(json.dumps({"clientContent": {"turns": [
                {"role": "user", "parts": [{"text": "still there?"}]}], "turnComplete": True}}))
            kinds = []
            while "turnComplete" not in kinds:
                frame = json.loads(await ws.recv())
                kinds += list(frame.get("serverContent", {}))
        return list(results)

    results = asyncio.run(scenario())
    assert emulator.process.poll() is None  # still running
    codes = [code for code, _ in results]
    assert all(code in (1007, 1008, 1009) for code in codes), sorted(set(map(str, codes)))
    assert codes[:CASES].count(1007) / CASES > 0.9
    assert all(reason for _, reason in results)
    assert not any(reason == EMULATOR_BUG for _, reason in results)
    hostile = results[CASES : CASES + len(HOSTILE)]
    assert [code for code, _ in hostile] == [1007] * len(HOSTILE)
    assert all(says in reason for (_, _, says), (_, reason) in zip(HOSTILE, hostile, strict=True))
    assert results[CASES + len(HOSTILE)][0] == 1009
    mutated = results[CASES + len(HOSTILE) + 1 :]
    assert 0 < [reason for _, reason in mutated].count(ACCEPTED) < len(mutated) // 2
    assert "Traceback" not in emulator.log.read_text()
    events = [json.loads(x) for x in emulator.events.read_text().splitlines()]
    assert not [e for e in events if e.get("why") == "emulator bug"]
    assert [e["code"] for e in events if e.get("why") == "frame too big"] == [1009]


def _is_setup(frame: str | bytes) -> bool:
    return frame.lstrip()[:9] in ('{"setup"', b'{"setup"')


def test_a_frame_nested_past_the_parser_depth_is_malformed() -> None:
    """JSON nested deeper than the parser goes is refused 1007 as malformed, not a crash."""
    with pytest.raises(ProtocolError) as info:
        parse_frame("[" * 100_000 + "]" * 100_000)
    assert info.value.code == 1007 and "malformed" in info.value.reason
