// The booking conversation of faultlab's JavaScript reference clients, on @google/genai: shared by
// the Node client (node.mjs) and the web page (web/page.mjs), which give it an environment (`Host`
// below): where its events go, the backend's URL, and how a lost connection is noticed.
//
// It is the Python `field-recovery` client (faultlab/clients/recovery.py over naive.py, with
// faultlab/scenarios/booking/conversation.py) in JavaScript, event for event: it asks for the
// booking (typed `say`, or the environment's microphone), hands each `book_slot` call
// (NON_BLOCKING) to the booking backend over HTTP (faultlab/scenarios/booking/service.py), answers
// the call by its id once the backend has committed, on whatever connection of its session is up,
// asks `ask` once every booking has committed (or the model has replied, none asked for) and the
// model is quiet, and logs the answer. On a loss it closes the old socket (1000: the close is what
// unlocks the session on the server), resumes with the last handle every `retryAfter` until
// `window` has passed since the loss, then opens a new session restored with the request, one
// status line per booking from the backend and, once they have committed, the question. Lost
// before the server's first handle, there is nothing to resume: a new session at once.
// Exit codes: 0 answered, 2 the first connection was refused, 3 never answered.

import { Behavior, GoogleGenAI, Modality, Type } from '@google/genai';

export const DEFAULTS = Object.freeze({
  say: 'Book me the 3pm slot tomorrow, please.',
  ask: 'Did you book it?',
  askAfter: 1.0, // s after the bookings commit (or the model replies) to ask
  retryAfter: 1.0, // s between resume attempts
  window: 4.0, // s after the loss to try resuming before a new session
  connectTimeout: 5.0, // s: an attempt not set up by then counts as refused
  pingInterval: 0.5, // s (Node)
  lostAfter: 2.0, // s of silence that mean lost (Node: no frame nor pong; a page: see watchSilence)
  quiet: 1.5, // s: after the answer, leave once nothing has come for this long
  duration: 60.0, // s: the whole conversation's cap
  model: 'gemini-3.8-live',
  audio: false, // spoken replies (24 kHz audio with a transcript) instead of text
  mic: false, // speak through the environment's microphone instead of typing `say`
  statusNote: true, // restore a new session with the backend's status lines
});

// The function the model may call, as conversation.py declares it.
const TOOL = 'book_slot';
const WATCH_TICK_S = 0.05;
const OUTPUT_RATE = 24000;
export const INPUT_RATE = 16000;
const OPEN = 1; // WebSocket.OPEN, in Node's `ws` as in a browser

const DURATION = /^\s*(\d+(?:\.\d+)?|\.\d+)\s*(ms|s|m|h)\s*$/;
const SECONDS_PER_UNIT = { ms: 0.001, s: 1, m: 60, h: 3600 };

/** Seconds in a duration as faultlab writes them (`500ms`, `2s`, `1.5m`): faultlab/units.py. */
export function parseDuration(text) {
  const match = DURATION.exec(String(text));
  if (match === null) throw new Error(`not a duration: '${text}' (write e.g. '1.5s', '200ms')`);
  return Number(match[1]) * SECONDS_PER_UNIT[match[2]];
}

// A Live API message's kind, as faultlab/protocols/gemini.py `kind_of` names it (its twin: a test
// holds the two to the same answers).
const SERVER_CONTENT_PARTS = ['interrupted', 'generation_complete', 'turn_complete', 'model_turn',
  'input_transcription', 'output_transcription'];

function snake(name) {
  return name.replace(/(?<!^)(?=[A-Z])/g, '_').toLowerCase();
}

/** Python's truth of a JSON value: empty objects, lists and strings, 0, false and null are false. */
function truthy(value) {
  if (Array.isArray(value)) return value.length > 0;
  if (value !== null && typeof value === 'object') return Object.keys(value).length > 0;
  return Boolean(value);
}

export function kindOf(message) {
  const keys = Object.keys(message);
  if (keys.length === 0) return 'empty';
  const first = keys.find((k) => snake(k) !== 'usage_metadata') ?? keys[0];
  const key = snake(first);
  const body = message[first];
  if (body === null || typeof body !== 'object' || Array.isArray(body)) return key;
  const inner = Object.keys(body);
  if (key === 'realtime_input' && inner.length > 0) return `${key}.${snake(inner[0])}`;
  if (key === 'server_content') {
    const present = [...new Set(inner.filter((k) => truthy(body[k])).map(snake))];
    if (present.length === 1) return `${key}.${present[0]}`;
    const parts = SERVER_CONTENT_PARTS.filter((p) => present.includes(p));
    parts.push(...present.filter((p) => !SERVER_CONTENT_PARTS.includes(p)).sort());
    if (parts.length > 0) return `${key}.${parts.join('+')}`;
  }
  return key;
}

const now = () => performance.now() / 1000;
const sleep = (seconds) => new Promise((resolve) => setTimeout(resolve, seconds * 1000));
const round = (x, digits) => Math.round(x * 10 ** digits) / 10 ** digits;

/** Whether `promise` settled within `seconds`. */
async function within(promise, seconds) {
  let timer;
  const late = new Promise((resolve) => { timer = setTimeout(() => resolve(false), seconds * 1000); });
  try {
    return await Promise.race([promise.then(() => true), late]);
  } finally {
    clearTimeout(timer);
  }
}

/** A flag that can be waited for (asyncio.Event). */
class Flag {
  #set = false;
  #waiters = [];

  isSet() { return this.#set; }

  set() {
    if (this.#set) return;
    this.#set = true;
    for (const wake of this.#waiters.splice(0)) wake();
  }

  clear() { this.#set = false; }

  wait() { return this.#set ? Promise.resolve() : new Promise((wake) => this.#waiters.push(wake)); }
}

/** Base64 of bytes, in Node (Buffer) and in a page (btoa). */
export function base64(bytes) {
  if (globalThis.Buffer !== undefined) {
    return globalThis.Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('base64');
  }
  let binary = '';
  for (let i = 0; i < bytes.length; i += 0x8000) {
    binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  }
  return btoa(binary);
}

/** How many bytes a base64 string holds. */
function decodedLength(data) {
  const padding = data.endsWith('==') ? 2 : data.endsWith('=') ? 1 : 0;
  return Math.floor((data.length * 3) / 4) - padding;
}

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

class Connection {
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

/** The booking backend's routes (faultlab/scenarios/booking/service.py) at `base`. */
class Backend {
  constructor(base) { this.base = base.replace(/\/$/, ''); }

  async #call(path, init) {
    const answer = await fetch(`${this.base}/${path}`, init);
    const body = await answer.json();
    if (!answer.ok) throw new Error(`backend ${path}: ${answer.status} ${body.error ?? ''}`);
    return body;
  }

  book(callId, slot) {
    return this.#call('book', { method: 'POST', headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ call_id: callId, slot }) });
  }

  committed(id) { return this.#call(`bookings/${encodeURIComponent(id)}?wait=1`); }

  status() { return this.#call('status'); }
}

/** The client's side of the booking (conversation.py's BookingConversation). */
class BookingConversation {
  constructor(client, options, backend) {
    this.line = client;
    this.o = options;
    this.backend = backend;
    this.emit = client.emit;
    this.bookings = new Map(); // id -> {id, status, slot}, as the backend last answered
    this.booking = 0; // calls handed to the backend not answered yet
    this.asked = false;
    this.replied = false;
    this.answered = new Flag();
  }

  opening() { return [['user', this.o.say]]; }

  /** A tool call: the backend books (or joins) at once; the call is answered on commit. */
  onCall(callId, name, args) {
    const born = this.line.generation;
    this.booking += 1;
    this.line.spawn(this.#respond(callId, name, String(args?.slot ?? ''), born));
  }

  onReply() {
    this.replied = true;
    if (this.asked) this.answered.set();
  }

  async #respond(callId, name, slot, born) {
    let booking;
    try {
      booking = await this.backend.book(callId, slot);
      this.bookings.set(booking.id, booking);
    } finally {
      this.booking -= 1;
    }
    booking = await this.backend.committed(booking.id);
    this.bookings.set(booking.id, booking);
    for (;;) {
      await this.line.up.wait();
      if (this.line.leaving) return;
      if (this.line.generation !== born) {
        await this.outlived(booking);
        return;
      }
      try {
        this.line.answerCall(callId, name, { status: booking.status, booking: booking.id });
        this.emit('client.tool_response', { id: callId, booking: booking.id });
        return;
      } catch {
        await this.line.drop('send failed');
      }
    }
  }

  /** A call's session was replaced by a new one, which cannot answer it: the new session is told
   * what happened (the update note), in the backend's own words. */
  async outlived(booking) {
    if (!this.o.statusNote) return;
    try {
      const { lines, bookings } = await this.backend.status();
      const line = lines[bookings.findIndex((b) => b.id === booking.id)];
      this.line.say([['user', line]], false);
      this.emit('client.status_note', { booking: booking.id, status: booking.status });
    } catch { /* the new session is gone too: its own restore tells it */ }
  }

  /** What a new session is told: the request, one status line per booking (with status notes),
   * and the question when its answer is known; whether the user's turn ends. */
  async restore() {
    let lines = [];
    if (this.o.statusNote || this.bookings.size > 0) {
      const status = await this.backend.status();
      for (const b of status.bookings) this.bookings.set(b.id, b);
      if (this.o.statusNote) lines = status.lines;
    }
    const turns = [['user', this.o.say], ...lines.map((line) => ['user', line])];
    const ask = this.askDue(false);
    if (ask) turns.push(['user', this.o.ask]);
    // A request the model never answered is owed a reply too (conversation.py says why).
    return { turns, ask, lines: lines.length, reply: ask || lines.length > 0 || !this.replied };
  }

  /** Time to ask: the model is not speaking, and every booking has committed, or (none asked
   * for) the model has replied. */
  askDue(speaking) {
    if (this.asked || !this.o.ask || speaking || this.booking > 0) return false;
    if (this.bookings.size > 0) return [...this.bookings.values()].every((b) => b.status === 'committed');
    return this.replied;
  }

  markAsked() {
    this.asked = true;
    this.answered.clear();
    this.emit('client.ask', { text: this.o.ask });
    this.line.status(`asked: ${this.o.ask}`);
  }

  /** Ask `askAfter` from now, unless the connection is lost meanwhile (handled first). */
  async ask(speaking) {
    await within(this.line.lost.wait(), this.o.askAfter);
    if (this.line.up.isSet() && this.askDue(speaking())) {
      try {
        this.line.say([['user', this.o.ask]], true);
        this.markAsked();
      } catch { /* lost as it asked: the restore asks */ }
    }
  }

  done() { return this.answered.isSet() || (this.replied && !this.o.ask); }
}

/**
 * The client. `host` is what its environment gives:
 * - `emit(name, fields)`: writes an event (Node: a line in FAULTLAB_EVENTS; a page: the console);
 * - `backend`: the booking backend's base URL (`http://127.0.0.1:PORT/backend`, `/backend`);
 * - `apiKey`;
 * - `watch`: how a lost connection is noticed besides its close: 'pings' (Node) or 'silence' (a
 *   page, which cannot ping);
 * - `status(text)` (optional): shows what it is doing (the page's status line).
 */
export class BookingClient {
  constructor(options, host) {
    this.o = { ...DEFAULTS, ...options };
    this.host = host;
    this.emit = host.emit;
    this.ai = new GoogleGenAI({ apiKey: host.apiKey });
    this.#adoptSockets();
    this.talk = new BookingConversation(this, this.o, new Backend(host.backend));
    this.handle = null;
    this.conn = null;
    this.up = new Flag();
    this.lost = new Flag();
    this.speaking = false; // a model turn is under way (output came, turnComplete not yet)
    this.generation = 0; // which session is in use: a new session cannot answer old calls
    this.leaving = false;
    this.lastAlive = now(); // the last frame or pong on the connection in use
    this.lastMessage = now();
    this.awaitingSince = null; // a page: since when a reply is owed (see watchSilence)
    this.lostAt = null;
    this.answer = [];
    this.audioS = 0;
    this.tasks = new Set();
    this.watching = null;
  }

  status(text) { this.host.status?.(text); }

  #adoptSockets() {
    const factory = this.ai.live?.webSocketFactory;
    if (typeof factory?.create !== 'function') {
      this.emit('client.sdk_changed', { missing: 'live.webSocketFactory.create' });
      return;
    }
    const create = factory.create.bind(factory);
    this.attempts = new WeakMap(); // our onclose -> its attempt
    factory.create = (url, headers, callbacks) => {
      const made = create(url, headers, callbacks);
      const attempt = this.attempts.get(callbacks?.onclose);
      if (attempt !== undefined) attempt.made = made;
      return made;
    };
  }

  // Connections.

  config(handle) {
    const audio = this.o.audio || this.o.mic;
    return {
      responseModalities: [audio ? Modality.AUDIO : Modality.TEXT],
      ...(audio ? { outputAudioTranscription: {} } : {}),
      tools: [{ functionDeclarations: [{ name: TOOL, behavior: Behavior.NON_BLOCKING,
        parameters: { type: Type.OBJECT, properties: { slot: { type: Type.STRING } } } }] }],
      sessionResumption: handle ? { handle } : {},
    };
  }

  /** A new connection (resuming `handle`, or a new session), set up but not in use yet; throws
   * `Refused`. */
  async connect(handle) {
    const attempt = new Connection(this);
    this.attempts?.set(attempt.callbacks.onclose, attempt);
    let timer;
    const late = new Promise((resolve) => {
      timer = setTimeout(() => resolve({ late: true }), this.o.connectTimeout * 1000);
    });
    let outcome;
    try {
      const connecting = this.ai.live.connect({ model: this.o.model, config: this.config(handle),
        callbacks: attempt.callbacks });
      outcome = await Promise.race([connecting.then((session) => ({ session })),
        attempt.closed.then((close) => ({ close })), late]);
    } catch (error) {
      outcome = { failed: error };
    } finally {
      clearTimeout(timer);
    }
    if (outcome.session !== undefined) {
      attempt.session = outcome.session;
      return attempt;
    }
    attempt.abort();
    if (outcome.close !== undefined && attempt.opened) {
      throw new Refused(outcome.close.code, outcome.close.reason || `closed ${outcome.close.code}`);
    }
    const error = outcome.late ? `not set up within ${this.o.connectTimeout}s`
      : outcome.failed ? String(outcome.failed?.message ?? outcome.failed)
        : attempt.error ?? `closed ${outcome.close.code} before it opened`;
    throw new Refused(null, error.slice(0, 200), outcome.late ? 'TimeoutError' : 'ConnectionError');
  }

  /** Make a set-up connection the one in use: receive on it, watch it, answer on it. */
  install(conn) {
    this.conn = conn;
    this.lastAlive = now();
    this.speaking = false;
    this.awaitingSince = null;
    this.lost.clear();
    this.up.set();
    conn.listen((message) => this.onMessage(conn, message));
    this.watching = conn;
    this.spawn(this.host.watch === 'pings' ? this.watchPings(conn) : this.watchSilence(conn));
    if (conn.closeInfo !== null) this.closedUnder(conn); // it closed as it was set up
  }

  /** The socket in use closed (or failed) under it. */
  closedUnder(conn) {
    if (conn !== this.conn || conn.dropped) return;
    const { code, reason } = conn.closeInfo;
    this.spawn(this.drop(`closed ${code}${reason ? ` ${reason}` : ''}`.slice(0, 100)));
  }

  /** Node: a ping every `pingInterval`; lost when neither a frame nor a pong came for
   * `lostAfter`, looked at every 50 ms (faultlab/clients/liveness.py). */
  async watchPings(conn) {
    const ws = conn.ws;
    if (typeof ws?.ping !== 'function') {
      this.emit('client.sdk_changed', { missing: 'a socket to ping: only closes are noticed' });
      return;
    }
    ws.on('pong', () => { if (conn === this.conn) this.lastAlive = now(); });
    let pinged = 0;
    while (this.watching === conn && !conn.dropped) {
      const t = now();
      if (t - pinged >= this.o.pingInterval) {
        if (ws.readyState !== OPEN) return; // closing: its close reports it
        try { ws.ping(); } catch { return; }
        pinged = t;
      }
      if (t - this.lastAlive > this.o.lostAfter) {
        await this.drop('pings unanswered');
        return;
      }
      await sleep(WATCH_TICK_S);
    }
  }

  /** A page: a browser cannot send pings and the Live API server sends none (L6), so a path
   * that dies silently (Wi-Fi gone, a NAT's state dropped) goes unnoticed by the page until its
   * TCP gives up, minutes later, unless the page watches for itself: while it waits for the
   * server (its turn ended, a tool response sent or a question asked, no turnComplete yet), no
   * message for `lostAfter` means lost ("server silent"). */
  async watchSilence(conn) {
    while (this.watching === conn && !conn.dropped) {
      const since = this.awaitingSince;
      if (since !== null && now() - Math.max(since, this.lastMessage) > this.o.lostAfter) {
        await this.drop('server silent');
        return;
      }
      await sleep(WATCH_TICK_S);
    }
  }

  /** The connection is dead (or declared so): a close sent on it first (field-recovery: the
   * close is what unlocks the session), then it is let go without a handshake. */
  async drop(why) {
    if (this.lost.isSet() || this.leaving || this.conn === null) return;
    const conn = this.conn;
    conn.closeNicely();
    this.emit('client.lost', { why });
    this.status(`lost (${why})`);
    this.lostAt = now();
    this.up.clear();
    this.lost.set();
    this.watching = null;
    conn.abort();
  }

  // Messages.

  onMessage(conn, message) {
    const t = now();
    this.lastMessage = t;
    this.lastAlive = t;
    const kind = kindOf(message);
    // The Python SDK's connect() reads setupComplete itself; this SDK hands it on too.
    if (kind === 'setup_complete') return;
    const handle = message.sessionResumptionUpdate?.newHandle;
    if (handle) this.handle = handle;
    const content = message.serverContent;
    const parts = content?.modelTurn?.parts ?? null;
    const calls = message.toolCall?.functionCalls;
    const output = Boolean(parts?.length || message.toolCall);
    if (output) this.speaking = true;
    if (output && this.lostAt !== null) {
      this.emit('client.recovered', { since_loss_s: round(t - this.lostAt, 3), kind });
      this.lostAt = null;
    }
    for (const call of calls ?? []) {
      const args = call.args ?? {};
      this.emit('client.tool_call', { id: call.id, name: call.name, args });
      this.status(`booking (${call.name})`);
      this.talk.onCall(String(call.id), String(call.name), args);
    }
    for (const part of parts ?? []) {
      if (part.text) this.answer.push(part.text);
      if (part.inlineData?.data) {
        if (this.audioS === 0) this.emit('client.audio_start', {});
        this.audioS += decodedLength(part.inlineData.data) / 2 / OUTPUT_RATE;
      }
    }
    if (content?.outputTranscription?.text) this.answer.push(content.outputTranscription.text);
    if (content?.turnComplete) {
      this.speaking = false;
      this.awaitingSince = null;
      if (this.audioS) {
        this.emit('client.audio_end', { audio_s: round(this.audioS, 3) });
        this.audioS = 0;
      }
      if (this.answer.length > 0) {
        const text = this.answer.join(' ');
        this.emit('client.answer', { text });
        this.status(`the model: ${text}`);
        this.answer = [];
        this.talk.onReply();
      }
    }
    if (kind !== 'session_resumption_update' && kind !== 'usage_metadata') {
      this.emit('client.received', { kind });
    }
  }

  spawn(promise) {
    const task = promise.catch((error) => {
      if (!this.leaving) this.emit('client.error', { error: String(error?.message ?? error).slice(0, 200) });
    }).finally(() => this.tasks.delete(task));
    this.tasks.add(task);
  }

  /** Sends, on the connection in use; each throws when its socket cannot take it. */
  #session() {
    if (this.conn === null || !this.conn.isOpen()) throw new Error('the connection is not open');
    return this.conn.session;
  }

  say(turns, turnComplete) {
    this.#session().sendClientContent({
      turns: turns.map(([role, text]) => ({ role, parts: [{ text }] })), turnComplete });
    if (turnComplete) this.awaitingSince = now();
  }

  answerCall(callId, name, response) {
    this.#session().sendToolResponse({ functionResponses: [{ id: callId, name, response }] });
    this.awaitingSince = now();
  }

  /** 16 kHz 16-bit mono PCM from the microphone, on whatever connection is up (lost while none
   * is, as on a phone); true when it went out. */
  sendAudio(pcm) {
    if (!this.up.isSet()) return false;
    try {
      this.#session().sendRealtimeInput({ audio: { data: base64(pcm),
        mimeType: `audio/pcm;rate=${INPUT_RATE}` } });
      return true;
    } catch {
      return false;
    }
  }

  // Resuming.

  /** Resume attempts with the last handle until one is set up (returned, not installed) or
   * `window` since the loss has passed (null). */
  async resumeAttempts(lostAt) {
    let attempt = 0;
    while (now() - lostAt < this.o.window) {
      attempt += 1;
      const started = now();
      this.emit('resume.attempt', { n: attempt, since_loss_s: round(started - lostAt, 3) });
      this.status(`resuming (${attempt})`);
      try {
        const conn = await this.connect(this.handle);
        this.emit('resume.ok', { n: attempt, latency_ms: round((now() - started) * 1000, 1),
          since_loss_s: round(now() - lostAt, 3) });
        return conn;
      } catch (error) {
        if (!(error instanceof Refused)) throw error;
        this.emit('resume.refused', { n: attempt, code: error.code,
          ...(error.code === null ? { error: error.error } : {}),
          latency_ms: round((now() - started) * 1000, 1) });
        const left = this.o.window - (now() - lostAt);
        await sleep(Math.max(0, Math.min(this.o.retryAfter, left)));
      }
    }
    this.emit('resume.gave_up', { attempts: attempt });
    return null;
  }

  /** A new session, connected again every `retryAfter` while it is refused, until `deadline`
   * (null then). */
  async newSession(deadline) {
    while (now() < deadline) {
      try {
        return await this.connect(null);
      } catch (error) {
        if (!(error instanceof Refused)) throw error;
        this.emit('recovery.failed', { code: error.code, error: error.message });
        await sleep(this.o.retryAfter);
      }
    }
    return null;
  }

  /** Make a new session the one in use and tell it what the user asked and what the backend
   * has done; ask the question with it when its answer is known (recovery.py's restore). */
  async restore(conn, lostAt) {
    // The backend is asked first: once the session is in use, a call of the old one that
    // committed meanwhile reports itself (its update note), after the restore as in Python.
    const { turns, ask, lines, reply } = await this.talk.restore();
    this.generation += 1;
    this.install(conn);
    this.emit('recovery.new_session', { since_loss_s: round(now() - lostAt, 3) });
    this.status('restoring a new session');
    this.say(turns, reply);
    if (ask) this.talk.markAsked();
    this.emit('recovery.restored', { lines, asked: ask });
  }

  /** After a loss: resumed within the window, else a new session restored (false: none could be
   * had before `deadline`). */
  async recover(deadline) {
    const lostAt = now();
    // Lost before the server's first handle, the session has nothing to resume (recovery.py).
    if (this.handle !== null) {
      const conn = await this.resumeAttempts(lostAt);
      if (conn !== null) {
        this.install(conn);
        return true;
      }
    }
    const conn = await this.newSession(deadline);
    if (conn === null) return false;
    await this.restore(conn, lostAt);
    return true;
  }

  // The run.

  async leave() {
    this.leaving = true;
    this.watching = null;
    const conn = this.conn;
    if (conn === null || !conn.isOpen()) return;
    conn.closeNicely();
    await within(conn.closed, 2);
  }

  /** The conversation, with the microphone's `source` (an object with `start(client)` and
   * `stop()`) when `mic` is on; resolves to the exit code. */
  async run(source = null) {
    const talk = this.talk;
    this.status('connecting');
    try {
      this.install(await this.connect(null));
    } catch (error) {
      if (!(error instanceof Refused)) throw error;
      this.emit('client.refused', { code: error.code,
        reason: error.code === null ? `${error.error}: ${error.message}` : error.message });
      this.status(`refused: ${error.message}`);
      return 2;
    }
    this.emit('client.connected', {});
    this.status('connected');
    if (this.o.mic && source !== null) source.start(this);
    else this.say(talk.opening(), true);
    const deadline = now() + this.o.duration;
    try {
      while (now() < deadline) {
        if (this.lost.isSet()) {
          if (!await this.recover(deadline)) return 3;
          continue;
        }
        if (talk.askDue(this.speaking)) {
          await talk.ask(() => this.speaking);
          continue;
        }
        // Answered, and nothing more is coming: the model may speak twice (the tool's result,
        // then the answer) when both waited behind a frozen path.
        if (talk.done() && now() - this.lastMessage > this.o.quiet) {
          await this.leave();
          return 0;
        }
        await sleep(WATCH_TICK_S);
      }
      return talk.done() ? 0 : 3;
    } finally {
      this.leaving = true;
      this.watching = null;
      source?.stop();
    }
  }
}
