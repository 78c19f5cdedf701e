"""pipecat's OpenAIRealtimeLLMService, reproduced on the SDK's connection (pipecat_service.py):
its start, a function call, conversation.item.retrieve, barge-in with truncation, and turns its
own VAD drives, interruption included."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Callable
from pathlib import Path

from openai import AsyncOpenAI

from ..conftest import BOOKING, HELLO, RunningEmulator
from ..test_openai_sdk import speech_24k
from .events import (
    BOOKED,
    PACE,
    RATE,
    Event,
    Findings,
    audio_bytes,
    b64,
    chunks,
    index,
    kind_is,
    of,
    read_until,
    sdk_problems,
    silence,
    transcript,
)
from .pipecat_service import (
    PIPECAT_MODEL,
    PIPECAT_RESPONSE,
    PIPECAT_TOOL,
    pipecat,
    pipecat_problems,
    pipecat_session,
    pipecat_setup,
)


def test_pipecat_context_and_function_call(emulator: RunningEmulator) -> None:
    """The service's start (session.update on session.created, the context's message and
    response.create on session.updated) and a function call: the call is tracked from its
    conversation.item.added and run on response.function_call_arguments.done; the result goes
    back with response.create at once, without waiting for response.done."""

    async def go() -> tuple[list[Event], str]:
        seen: list[Event] = []
        async with AsyncOpenAI().realtime.connect(model=PIPECAT_MODEL) as conn:
            session = pipecat_session(
                # examples/realtime/realtime-openai.py: transcription, semantic VAD, noise
                # reduction; the tools from the context (llm.py:809-822).
                audio={"input": {"transcription": {"model": "gpt-realtime-whisper"},
                                 "noise_reduction": {"type": "near_field"},
                                 "turn_detection": {"type": "semantic_vad"}}},
                tools=[PIPECAT_TOOL])
            item_id = await pipecat_setup(conn, seen, session, BOOKING)
            done = await read_until(conn, "response.function_call_arguments.done", seen)
            call = done[-1]
            # llm.py:1077-1105: run at once; the result (1378-1385) and response.create
            # (1279-1280 → 1210-1214) follow it.
            output = json.dumps({"status": "booked", "slot": json.loads(call["arguments"])["slot"]})
            await conn.send(pipecat("conversation.item.create", item={
                "id": uuid.uuid4().hex, "type": "function_call_output",
                "call_id": call["call_id"], "output": output}))
            await conn.send(pipecat("response.create", response=PIPECAT_RESPONSE))
            await read_until(conn, lambda e: e["type"] == "response.done"
                             and e["response"]["output"]
                             and e["response"]["output"][0]["type"] == "message", seen)
            # retrieve_conversation_item (llm.py:460-485): event_id "rci_{item_id}", awaited until
            # conversation.item.retrieved (llm.py:992-996), or an error
            # item_retrieve_invalid_item_id whose event_id names the item (llm.py:1131-1149).
            for wanted in (item_id, "item_gone"):
                await conn.send({**pipecat("conversation.item.retrieve", item_id=wanted),
                                 "event_id": f"rci_{wanted}"})
            # A fence: the service answers a connection's events in order.
            await conn.send(pipecat("input_audio_buffer.clear"))
            await read_until(conn, "input_audio_buffer.cleared", seen)
        return seen, item_id

    seen, item_id = asyncio.run(go())
    found = Findings()
    found.check(not pipecat_problems(seen), pipecat_problems(seen))
    # llm.py:949-951: its own items are recognised by the id it gave them.
    found.check(any(kind_is("conversation.item.added", **{"item.id": item_id})(e) for e in seen),
                "no conversation.item.added with the context message's id")
    (call,) = of(seen, "response.function_call_arguments.done")
    added = index(seen, kind_is("conversation.item.added", **{"item.call_id": call["call_id"]}))
    # llm.py:936-942, 1090-1108: a call is run only if conversation.item.added told of it first,
    # and its name is read from that item (llm.py:1100).
    found.check(added < seen.index(call), "the call's conversation.item.added does not come first")
    found.check(added < len(seen) and seen[added]["item"].get("name") == "book_slot",
                "the call's conversation.item.added has no name")
    found.check(json.loads(call["arguments"]) == {"slot": "tomorrow at 3pm"}, call["arguments"])
    spoken = [e for e in of(seen, "response.done") if e["response"]["output"]
              and e["response"]["output"][0]["type"] == "message"]
    found.check(transcript(seen, spoken[-1]["response"]["id"]) == BOOKED,
                f"said {transcript(seen)!r}")
    retrieved = [e["item"]["id"] for e in of(seen, "conversation.item.retrieved")]
    found.check(retrieved == [item_id], f"conversation.item.retrieve of {item_id}: retrieved "
                f"{retrieved} (retrieve_conversation_item waits for it forever)")
    refused = [e["error"] for e in of(seen, "error")]
    found.check([(r["code"], r["event_id"]) for r in refused]
                == [("item_retrieve_invalid_item_id", "rci_item_gone")],
                f"conversation.item.retrieve of an unknown item: errors {refused}")
    found.check(not sdk_problems(seen), sdk_problems(seen))
    found.done()


def test_pipecat_server_vad_turn_and_barge_in(emulator: RunningEmulator,
                                              utterances: Path) -> None:
    """Server VAD: the user's speech is answered; speech over the answer makes pipecat truncate
    the audio item it was playing (on input_audio_buffer.speech_started, llm.py:1116-1121 →
    588-621), and the new turn is answered."""

    async def go() -> tuple[list[Event], Event]:
        seen: list[Event] = []
        async with AsyncOpenAI().realtime.connect(model=PIPECAT_MODEL) as conn:
            # events.py:94-107: TurnDetection() with its defaults.
            session = pipecat_session(audio={"input": {
                "transcription": {"model": "gpt-realtime-whisper"},
                "turn_detection": {"type": "server_vad", "threshold": 0.5,
                                   "prefix_padding_ms": 300, "silence_duration_ms": 500}}})
            await pipecat_setup(conn, seen, session, "Say hello!")
            await read_until(conn, "response.done", seen)

            async def speak(name: str) -> None:  # llm.py:1306-1308, 20 ms frames
                for chunk in chunks(speech_24k(utterances, name) + silence(1.0), 0.02):
                    await conn.send(pipecat("input_audio_buffer.append", audio=b64(chunk)))
                    await asyncio.sleep(0.02 * PACE)

            first = asyncio.create_task(speak("hello"))
            answer = await read_until(conn, "response.output_audio.delta", seen)
            await first
            playing = answer[-1]
            started = asyncio.get_running_loop().time()
            barge_in = asyncio.create_task(speak("asked"))
            await read_until(conn, "input_audio_buffer.speech_started", seen)
            # _truncate_current_audio_response (llm.py:588-621): the shorter of the wall clock
            # and the audio received.
            received = audio_bytes([e for e in seen if e.get("item_id") == playing["item_id"]
                                    and e["type"] == "response.output_audio.delta"]) // 2
            elapsed_ms = int((asyncio.get_running_loop().time() - started) * 1000)
            truncate = pipecat("conversation.item.truncate", item_id=playing["item_id"],
                               content_index=playing["content_index"],
                               audio_end_ms=min(elapsed_ms, received * 1000 // RATE))
            await conn.send(truncate)
            await barge_in
            await read_until(conn, lambda e: e["type"] == "response.done"
                             and transcript(seen, e["response"]["id"]) != "", seen)
        return seen, truncate

    seen, truncate = asyncio.run(go())
    found = Findings()
    found.check(not pipecat_problems(seen), pipecat_problems(seen))
    truncated = of(seen, "conversation.item.truncated")
    found.check([(t["item_id"], t["audio_end_ms"]) for t in truncated]
                == [(truncate["item_id"], truncate["audio_end_ms"])], f"truncated: {truncated}")
    heard = [e["transcript"] for e in
             of(seen, "conversation.item.input_audio_transcription.completed")]
    # The second utterance starts 2.7476 s into the stream (the first clip, then 1 s of silence):
    # not on a 20 ms boundary, as a microphone's speech may start anywhere.
    found.check(heard == [HELLO, "Did you book it?"],
                f"transcriptions: {heard} (the second utterance's onset is off the 20 ms grid)")
    said = [transcript(seen, e["response"]["id"]) for e in of(seen, "response.done")]
    found.check(said == ["You said: Say hello!", f"You said: {HELLO}",
                         "I haven't booked anything yet."], f"said: {said}")
    found.check(not sdk_problems(seen), sdk_problems(seen))
    found.done()


def test_pipecat_locally_driven_turns(start_emulator: Callable[..., RunningEmulator],
                                      utterances: Path) -> None:
    """turn_detection=False (sent as null, events.py:404-409): pipecat's own VAD drives the turns.
    A turn ends with input_audio_buffer.commit and response.create (llm.py:572-575); the user
    speaking again as the answer is asked for is an interruption: input_audio_buffer.clear, the
    last 0.5 s of audio appended again so the onset survives the clear, response.cancel
    (llm.py:554-561, 1321-1332; DEFAULT_USER_AUDIO_PREROLL_SECS, llm.py:77), and no truncation,
    no audio having come (llm.py:595-596)."""

    # The interruption must reach the emulator before its answer does: a reply 1 s after the
    # request (10 s at time scale 0.1) rather than the personality's 30-70 ms, which a loaded
    # machine's client once took longer than to send its 13 messages (the answer completed).
    start_emulator("openai-realtime", 0.1, "--set", "reply_s=[10, 10]")

    async def go() -> tuple[list[Event], list[Event]]:
        seen: list[Event] = []
        sent = bytearray()  # the pre-roll: every append, the last 0.5 s kept (llm.py:1314-1319)

        async def append(pcm: bytes, pace: float = PACE) -> None:
            for chunk in chunks(pcm, 0.02):
                await conn.send(pipecat("input_audio_buffer.append", audio=b64(chunk)))
                sent.extend(chunk)
                await asyncio.sleep(0.02 * pace)

        async with AsyncOpenAI().realtime.connect(model=PIPECAT_MODEL) as conn:
            session = pipecat_session(audio={"input": {
                "transcription": {"model": "gpt-realtime-whisper"}, "turn_detection": None}})
            await pipecat_setup(conn, seen, session, "Say hello!")
            await read_until(conn, "response.done", seen)
            await append(speech_24k(utterances, "hello") + silence(0.5))
            await conn.send(pipecat("input_audio_buffer.commit"))
            await conn.send(pipecat("response.create", response=PIPECAT_RESPONSE))
            # The user goes on speaking: the local VAD confirms speech after its start_secs
            # (0.2 s), appended by then, and interrupts the answer before it begins.
            second = speech_24k(utterances, "asked")
            onset = int(0.2 * RATE) * 2
            await append(second[:onset], pace=0)
            interrupted_at = len(seen)
            await conn.send(pipecat("input_audio_buffer.clear"))
            await conn.send(pipecat("input_audio_buffer.append",
                                    audio=b64(bytes(sent[-int(0.5 * RATE) * 2:]))))
            await conn.send(pipecat("response.cancel"))
            await append(second[onset:] + silence(0.5))
            await conn.send(pipecat("input_audio_buffer.commit"))
            await conn.send(pipecat("response.create", response=PIPECAT_RESPONSE))
            cancelled = await read_until(conn, "response.done", seen)
            await read_until(conn, lambda e: e["type"] == "response.done"
                             and e["response"]["id"] != cancelled[-1]["response"]["id"], seen)
        return seen, seen[interrupted_at:]

    seen, interrupted = asyncio.run(go())
    found = Findings()
    found.check(not pipecat_problems(seen), pipecat_problems(seen))
    found.check(of(interrupted, "input_audio_buffer.cleared"), "no input_audio_buffer.cleared")
    statuses = [e["response"]["status"] for e in of(seen, "response.done")]
    found.check(statuses == ["completed", "cancelled", "completed"], f"responses: {statuses}")
    # What the second commit held: the pre-roll (silence and the onset) and the rest of it, the
    # onset once: the clear dropped what was appended before it.
    said = transcript(interrupted, of(interrupted, "response.done")[-1]["response"]["id"])
    found.check(said == "I haven't booked anything yet.",
                f"the second turn was answered {said!r}: the audio appended before "
                "input_audio_buffer.clear was kept")
    found.check(not sdk_problems(seen), sdk_problems(seen))
    found.done()
