"""The server's events (the emulator's and a cassette replay's) that the report and the
expectations name, held in this one module: their records (faultlab.vocabulary.server) are
declared apart, and once they are in the vocabulary these names and drawings are theirs.

`SERVER_DRAWINGS` draws the server's events whose record the vocabulary does not hold; any other
event of `SERVER_PREFIX` is a note on the server's lane.
"""

from __future__ import annotations

from faultlab.vocabulary.base import NOT_DRAWN, Drawing

SERVER_PREFIX = "emulator."
SERVER_LISTENING = "emulator.listening"
SERVER_CONNECT = "emulator.connect"
SERVER_CLOSE = "emulator.close"
SERVER_DISCONNECT = "emulator.disconnect"
# The test peers' echo server (faultlab.peers.ws_server), whose events a summary shows.
PEER_SERVER_PREFIX = "server."

# Its connections and frames are drawn as messages and TCP marks, not as marks of their own.
SERVER_DRAWINGS: dict[str, Drawing] = {
    SERVER_LISTENING: NOT_DRAWN, SERVER_CONNECT: NOT_DRAWN, SERVER_CLOSE: NOT_DRAWN,
    SERVER_DISCONNECT: NOT_DRAWN,
    "emulator.resumed": Drawing("server", "recovered"),
    "emulator.tcp_gave_up": Drawing("server", "loss"),
    "emulator.answer": Drawing("server", "conversation"),
}
