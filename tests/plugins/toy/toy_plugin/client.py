"""The toy client: opens a session of the toy API at `$TOY_BASE_URL/echo`, says `$TOY_SAY`,
and exits 0 once the model's turn is done (1 when it never is), writing `toy.*` events."""

from __future__ import annotations

import argparse
import json
import os
import ssl

from websockets.sync.client import connect

from faultlab.events import EventWriter


def main() -> int:
    parser = argparse.ArgumentParser(prog="toy-client")
    parser.add_argument("--model", default="toy-1")
    args = parser.parse_args()
    events = EventWriter()
    url = os.environ["TOY_BASE_URL"].replace("https://", "wss://", 1) + "/echo"
    with connect(url, ssl=ssl.create_default_context(), additional_headers={"x-toy-key": "toy"},
                 open_timeout=10) as ws:
        events.emit("toy.connected", url=url)
        ws.send(json.dumps({"toy": "hello", "model": args.model}))
        ws.send(json.dumps({"toy": "say", "text": os.environ.get("TOY_SAY", "hello")}))
        while True:
            message = json.loads(ws.recv(timeout=10))
            events.emit(f"toy.{message['toy']}", **{k: v for k, v in message.items() if k != "toy"})
            if message["toy"] == "done":
                return 0


if __name__ == "__main__":
    raise SystemExit(main())
