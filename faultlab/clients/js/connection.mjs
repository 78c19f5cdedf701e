// A connection attempt of the JavaScript clients, and the SDK internals it reaches into.

export const OPEN = 1; // WebSocket.OPEN, in Node's `ws` as in a browser

/** A connection attempt refused before it was set up: by a close (`code`), or with no WebSocket
 * at all (`code` null: unreachable, TLS refused, an HTTP error, a timeout). */
export class Refused extends Error {
  constructor(code, reason, error) {
    super(reason);
    this.code = code;
    this.reason = reason;
    this.error = error;
  }
}

// The SDK internals reached into, each explained, in one place (as faultlab/clients/sdk.py is for
// the Python SDK's). `ai.live.connect()` builds its socket with `ai.live.webSocketFactory.create(
// url, headers, callbacks)`, which returns the SDK's connection object (NodeWebSocket in Node,
// BrowserWebSocket in a page; the Session keeps it as `session.conn`) and whose `.ws`, once its
// connect() has run, is the raw socket: the `ws` package's WebSocket in Node, the browser's in a
// page. The SDK offers no public way to it, and the client needs it:
// - because `live.connect()` resolves only on setupComplete: a socket that closes before (a
//   refused resume: the server closes with 1011 after the setup) leaves it pending for ever, so the
//   close is taken from our own onclose, and an attempt that hangs is ended through the socket;
// - to ping in Node (`ws.ping()`, answered by 'pong' events): the SDK sends no pings, and the
//   field's clients noticed a dead path by their own pings unanswered;
// - to close with 1000 (`ws.close(1000)`; the SDK's close() sends no code) and to drop a dead
//   connection without a handshake (`ws.terminate()` in Node; a page can only close);
// - to tell whether a send can still go out (`ws.readyState`): neither socket throws on a send
//   after the close, they drop it.
// The factory's create is wrapped once per client; it hands each connection object to the
// attempt whose callbacks it was given. Where an SDK renames these, the client loses those
// abilities (no pings: only closes are noticed), and says so once (client.sdk_changed).

export class Connection {
  constructor(client) {
    this.client = client;
    this.made = null; // the SDK's connection object
    this.session = null;
    this.opened = false;
    this.error = null;
    this.dropped = false;
    this.closeInfo = null;
    this.handler = null;
    this.queue = [];
    this.closed = new Promise((resolve) => { this.closedWith = resolve; });
    this.callbacks = {
      onopen: () => { this.opened = true; },
      onmessage: (message) => this.deliver(message),
      onerror: (event) => { this.error = errorText(event); },
      onclose: (event) => {
        this.closeInfo = { code: event?.code ?? null, reason: event?.reason ?? '' };
        this.closedWith(this.closeInfo);
        if (this.handler !== null) this.client.closedUnder(this);
      },
    };
  }

  /** The raw WebSocket, once the SDK has made it. */
  get ws() { return this.made?.ws ?? null; }

  isOpen() { return this.ws !== null && this.ws.readyState === OPEN; }

  deliver(message) {
    if (this.dropped) return;
    if (this.handler === null) this.queue.push(message);
    else this.handler(message);
  }

  /** Receive on it: the messages that came while it was set up first. */
  listen(handler) {
    this.handler = handler;
    for (const message of this.queue.splice(0)) handler(message);
  }

  /** Send a close (1000) if the socket is open; the path may never carry it. */
  closeNicely() {
    const ws = this.ws;
    if (ws !== null && ws.readyState === OPEN) {
      try { ws.close(1000); } catch { /* closing already */ }
    }
  }

  /** Let it go: no more messages, the socket dropped without a handshake (Node) or closed. */
  abort() {
    this.dropped = true;
    this.handler = null;
    const ws = this.ws;
    if (ws === null) return;
    try {
      if (typeof ws.terminate === 'function') ws.terminate();
      else ws.close();
    } catch { /* gone already */ }
  }
}

function errorText(event) {
  const error = event?.error ?? event;
  return String(error?.message ?? error?.type ?? error ?? 'error').slice(0, 200);
}
