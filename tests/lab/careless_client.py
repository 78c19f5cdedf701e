"""A raw Live API client that is careless with secrets, for the redaction tests.

    careless_client.py --via query|header [--key KEY] [--handles FILE]

It sends its key (`--key`, else GOOGLE_API_KEY or GEMINI_API_KEY) as `?key=` or in the
`x-goog-api-key` header, has one text turn, then resumes with the last handle it was given. It
prints its URL, headers and handles to stdout, and writes its events as raw JSON lines (not
through faultlab's writer) with the key and handles in them, as a client in another language
might; every handle it received goes to `--handles` (outside the run folder) for the test.
"""

import argparse
import asyncio
import json
import os
import ssl
import time
from typing import Any

from websockets.asyncio.client import ClientConnection, connect

PATH = "/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent"
MODEL = "models/gemini-3.8-live"


def emit(event: str, **fields: Any) -> None:
    line = json.dumps({"event": event, "ts": time.time(), **fields}) + "\n"
    with open(os.environ["FAULTLAB_EVENTS"], "a", encoding="utf-8") as f:
        f.write(line)


async def session(url: str, headers: dict[str, str], handle: str | None,
                  handles: list[str]) -> None:
    context = ssl.create_default_context(cafile=os.environ["SSL_CERT_FILE"])
    print(f"connecting to {url} with headers {headers}", flush=True)
    async with connect(url, ssl=context, additional_headers=headers) as ws:
        emit("client.connected", url=url, headers=headers, resume_handle=handle)
        await ws.send(json.dumps({"setup": {
            "model": MODEL, "generationConfig": {"responseModalities": ["TEXT"]},
            "sessionResumption": {"handle": handle} if handle else {}}}))
        await until(ws, "setupComplete", handles)
        if handle is not None:
            await until(ws, "sessionResumptionUpdate", handles)
            emit("client.resumed", note=f"resumed {handle}")
            return
        await ws.send(json.dumps({"clientContent": {
            "turns": [{"role": "user", "parts": [{"text": "Hello from the lab"}]}],
            "turnComplete": True}}))
        await until(ws, "turnComplete", handles)


async def until(ws: ClientConnection, wanted: str, handles: list[str]) -> None:
    async for raw in ws:
        message = json.loads(raw)
        update = message.get("sessionResumptionUpdate") or {}
        if update.get("newHandle"):
            handles.append(update["newHandle"])
            print(f"new handle {update['newHandle']}", flush=True)
            emit("client.handle", sessionHandle=update["newHandle"], raw=message)
        if wanted in message or wanted in (message.get("serverContent") or {}):
            return


async def main(args: argparse.Namespace) -> None:
    key = args.key or os.environ.get("GOOGLE_API_KEY") or os.environ["GEMINI_API_KEY"]
    base = os.environ["GOOGLE_GEMINI_BASE_URL"].replace("https://", "wss://")
    if args.via == "query":
        url, headers = f"{base}{PATH}?key={key}", {}
    else:
        url, headers = base + PATH, {"x-goog-api-key": key}
    handles: list[str] = []
    try:
        await session(url, headers, None, handles)
        # The service refuses a resume right after an idle session's drop (R1, R2: for 1.5 s, scaled).
        await asyncio.sleep(0.5)
        await session(url, headers, handles[-1], handles)
    finally:
        if args.handles:
            with open(args.handles, "a", encoding="utf-8") as f:
                f.writelines(h + "\n" for h in handles)
    print(f"done with key {key}", flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--via", choices=["query", "header"], required=True)
    parser.add_argument("--key", default=None)
    parser.add_argument("--handles", default=None)
    asyncio.run(main(parser.parse_args()))
