"""LiveKit Agents' RealtimeModel, reproduced on the SDK's connection (livekit_model.py): a user
text turn with a function call, and a spoken turn interrupted as the reply starts."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from openai import AsyncOpenAI

from ..conftest import BOOKING, HELLO, RunningEmulator
from ..test_openai_sdk import speech_24k
from .events import (
    BOOKED,
    MODEL,
    PACE,
    Event,
    Findings,
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
from .livekit_model import (
    LIVEKIT_TOOL,
    livekit_add_item,
    livekit_generate_reply,
    livekit_problems,
    livekit_start,
    shortuuid,
)


def test_livekit_user_text_and_function_call(emulator: RunningEmulator) -> None:
    """generate_reply(user_input=...) (agent_activity.py:3761-3811): the user's message through
    update_chat_ctx, then response.create with its client_event_id; the function call read from
    response.output_item.done, its output added to the chat context, and a reply generated."""

    async def go() -> tuple[list[Event], list[tuple[str, list[Event]]]]:
        seen: list[Event] = []
        # process_base_url (:819-866) turns OPENAI_BASE_URL (:519) into the URL the SDK makes.
        async with AsyncOpenAI().realtime.connect(
                model=MODEL, extra_headers={"User-Agent": "LiveKit Agents"}) as conn:  # :1069
            await livekit_start(conn, [LIVEKIT_TOOL])
            user = {"id": shortuuid("item_"), "type": "message", "role": "user",
                    "content": [{"type": "input_text", "text": BOOKING}]}  # utils.py:202-244
            await livekit_add_item(conn, seen, user, "root")  # :1547: "root" before the first
            replies = [await livekit_generate_reply(conn, seen)]
            call = next(e["item"] for e in of(replies[0][1], "response.output_item.done")
                        if e["item"]["type"] == "function_call")
            # The tool's output joins the chat context (agent_activity.py:4362-4363; utils.py:
            # 158-167), after the call; then the reply (agent_activity.py:4374-4395).
            await livekit_add_item(conn, seen, {
                "id": shortuuid("item_"), "type": "function_call_output",
                "call_id": call["call_id"], "output": json.dumps({"status": "booked"})},
                call["id"])
            replies.append(await livekit_generate_reply(conn, seen))
        return seen, replies

    seen, replies = asyncio.run(go())
    found = Findings()
    for event_id, response in replies:
        found.wrong += livekit_problems(response, event_id)
    found.check(not of(seen, "error"), of(seen, "error"))
    calls = [e["item"] for e in of(replies[0][1], "response.output_item.done")]
    found.check([(c["type"], c.get("name"), c.get("arguments")) for c in calls]
                == [("function_call", "book_slot", '{"slot": "tomorrow at 3pm"}')], calls)
    found.check(transcript(replies[1][1]) == BOOKED, f"said {transcript(replies[1][1])!r}")
    found.check(not sdk_problems(seen), sdk_problems(seen))
    found.done()


def test_livekit_spoken_turn_and_interruption(emulator: RunningEmulator,
                                              utterances: Path) -> None:
    """Audio pushed in 100 ms chunks (:929-932, :1656-1666), turns by the server's (semantic)
    VAD; the user's transcript attached to the item conversation.item.added announced
    (:2019-2040); the reply interrupted as it starts (the user speaking over it, or
    AgentSession.interrupt()): interrupt() sends response.cancel (:1746-1749), and truncate()
    of a message none of which was played deletes it (:1769-1776); a later response.cancel,
    nothing being under way, gets an error LiveKit ignores by its message (:2322-2323)."""

    async def go() -> tuple[list[Event], list[Event]]:
        seen: list[Event] = []
        async with AsyncOpenAI().realtime.connect(
                model=MODEL, extra_headers={"User-Agent": "LiveKit Agents"}) as conn:
            await livekit_start(conn, [])

            async def push() -> None:  # the microphone, sent as it comes
                for chunk in chunks(speech_24k(utterances, "hello") + silence(1.0), 0.1):
                    await conn.send({"type": "input_audio_buffer.append", "audio": b64(chunk)})
                    await asyncio.sleep(0.1 * PACE)

            microphone = asyncio.create_task(push())
            answer = await read_until(conn, kind_is("response.output_item.added",
                                                    **{"item.type": "message"}), seen)
            message = answer[-1]["item"]["id"]
            await conn.send({"type": "response.cancel"})
            await conn.send({"type": "conversation.item.delete", "item_id": message,
                             "event_id": shortuuid("chat_ctx_delete_")})
            response = answer[index(answer, kind_is("response.created")):]
            response += await read_until(conn, "response.done", seen)
            await microphone
            await read_until(conn, kind_is("conversation.item.deleted", item_id=message), seen)
            await conn.send({"type": "response.cancel"})
            await read_until(conn, "error", seen)
        return seen, response

    seen, response = asyncio.run(go())
    found = Findings()
    found.wrong += livekit_problems(response, None)
    (heard,) = of(seen, "conversation.item.input_audio_transcription.completed")
    found.check(heard["transcript"] == HELLO, heard)
    # :2026-2029: the transcript goes to the item the chat context has by then.
    added = index(seen, kind_is("conversation.item.added", **{"item.id": heard["item_id"]}))
    found.check(added < seen.index(heard), "the transcript's item was not added before it")
    # The cancel comes while the answer is generated (at 4x real time and time scale 0.1, its
    # 2.3 s of audio take 60 ms), or, on a loaded machine, after: then it is refused too.
    done = response[-1]["response"]
    late = done["status"] == "completed"
    found.check(late or (done["status"] == "cancelled" and (done["status_details"] or {}).get(
        "type") == "cancelled"), f"response.done: {done['status']}, {done['status_details']}")
    errors = of(seen, "error")
    found.check(len(errors) == 1 + late and all(e["error"]["message"].startswith(
        "Cancellation failed") for e in errors), f"errors: {errors}")
    found.check(not sdk_problems(seen), sdk_problems(seen))
    found.done()
