// The booking conversation of faultlab's JavaScript reference clients, on @google/genai: shared by
// the Node client (node.mjs) and the web page (web/page.mjs), which give it an environment (`Host`
// below): where its events go, the backend's URL, and how a lost connection is noticed.
//
// It is the Python `field-recovery` client (faultlab/clients/recovery.py over the loop of
// faultlab/clients/driver.py) in JavaScript, its events the same records (./events.mjs), its
// phrases, tool and timings the same data (./script.mjs, conversation.json): it asks for the
// booking (typed `say`, or the environment's microphone), hands each `book_slot` call
// (NON_BLOCKING) to the booking backend over HTTP (faultlab/scenarios/booking/service.py), answers
// the call by its id once the backend has committed, on whatever connection of its session is up,
// asks `ask` once every booking has committed (or the model has replied, none asked for) and the
// model is quiet, and logs the answer. On a loss it closes the old socket (1000: the close is what
// unlocks the session on the server), resumes with the last handle every `retryAfter` until
// `window` has passed since the loss, then opens a new session restored with the request, one
// status line per booking from the backend and, once they have committed, the question. Lost
// before the server's first handle, there is nothing to resume: a new session at once.
// Exit codes: 0 answered, 2 the first connection was refused, 3 never answered (EXIT). What it says
// and its defaults are the script both languages read (script.mjs); the conversation's state and
// the backend are conversation.mjs's, a connection attempt connection.mjs's.

import { GoogleGenAI, Modality } from '@google/genai';

import { Connection, OPEN, Refused } from './connection.mjs';
import { Backend, BookingConversation } from './conversation.mjs';
import {
  CLIENT_ANSWER, CLIENT_AUDIO_END, CLIENT_AUDIO_START, CLIENT_CONNECTED, CLIENT_ERROR, CLIENT_LOST,
  CLIENT_RECEIVED, CLIENT_RECOVERED, CLIENT_REFUSED, CLIENT_SDK_CHANGED, CLIENT_TOOL_CALL,
  RECOVERY_FAILED, RECOVERY_NEW_SESSION, RECOVERY_RESTORED, RESUME_ATTEMPT, RESUME_GAVE_UP,
  RESUME_OK, RESUME_REFUSED,
} from './events.mjs';
import { base64, decodedLength, INPUT_RATE, kindOf, OUTPUT_RATE } from './live.mjs';
import { DEFAULTS, EXIT, toolDeclaration } from './script.mjs';
import { Flag, now, round, sleep, within } from './timing.mjs';

// What node.mjs and the page take from here.
export { base64, DEFAULTS, INPUT_RATE, kindOf, Refused };
export { parseDuration } from './script.mjs';

const WATCH_TICK_S = 0.05;

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
      this.emit(CLIENT_SDK_CHANGED, { missing: 'live.webSocketFactory.create' });
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
      tools: [{ functionDeclarations: [toolDeclaration()] }],
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
      this.emit(CLIENT_SDK_CHANGED, { missing: 'a socket to ping: only closes are noticed' });
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
    this.emit(CLIENT_LOST, { why });
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
      this.emit(CLIENT_RECOVERED, { since_loss_s: round(t - this.lostAt, 3), kind });
      this.lostAt = null;
    }
    for (const call of calls ?? []) {
      const args = call.args ?? {};
      this.emit(CLIENT_TOOL_CALL, { id: call.id, name: call.name, args });
      this.status(`booking (${call.name})`);
      this.talk.onCall(String(call.id), String(call.name), args);
    }
    for (const part of parts ?? []) {
      if (part.text) this.answer.push(part.text);
      if (part.inlineData?.data) {
        if (this.audioS === 0) this.emit(CLIENT_AUDIO_START, {});
        this.audioS += decodedLength(part.inlineData.data) / 2 / OUTPUT_RATE;
      }
    }
    if (content?.outputTranscription?.text) this.answer.push(content.outputTranscription.text);
    if (content?.turnComplete) {
      this.speaking = false;
      this.awaitingSince = null;
      if (this.audioS) {
        this.emit(CLIENT_AUDIO_END, { audio_s: round(this.audioS, 3) });
        this.audioS = 0;
      }
      if (this.answer.length > 0) {
        const text = this.answer.join(' ');
        this.emit(CLIENT_ANSWER, { text });
        this.status(`the model: ${text}`);
        this.answer = [];
        this.talk.onReply();
      }
    }
    if (kind !== 'session_resumption_update' && kind !== 'usage_metadata') {
      this.emit(CLIENT_RECEIVED, { kind });
    }
  }

  spawn(promise) {
    const task = promise.catch((error) => {
      if (!this.leaving) this.emit(CLIENT_ERROR, { error: String(error?.message ?? error).slice(0, 200) });
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
      this.emit(RESUME_ATTEMPT, { n: attempt, since_loss_s: round(started - lostAt, 3) });
      this.status(`resuming (${attempt})`);
      try {
        const conn = await this.connect(this.handle);
        this.emit(RESUME_OK, { n: attempt, latency_ms: round((now() - started) * 1000, 1),
          since_loss_s: round(now() - lostAt, 3) });
        return conn;
      } catch (error) {
        if (!(error instanceof Refused)) throw error;
        this.emit(RESUME_REFUSED, { n: attempt, code: error.code,
          ...(error.code === null ? { error: error.error } : {}),
          latency_ms: round((now() - started) * 1000, 1) });
        const left = this.o.window - (now() - lostAt);
        await sleep(Math.max(0, Math.min(this.o.retryAfter, left)));
      }
    }
    this.emit(RESUME_GAVE_UP, { attempts: attempt });
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
        this.emit(RECOVERY_FAILED, { code: error.code, error: error.message });
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
    this.emit(RECOVERY_NEW_SESSION, { since_loss_s: round(now() - lostAt, 3) });
    this.status('restoring a new session');
    this.say(turns, reply);
    if (ask) this.talk.markAsked();
    this.emit(RECOVERY_RESTORED, { lines, asked: ask });
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
      this.emit(CLIENT_REFUSED, { code: error.code,
        reason: error.code === null ? `${error.error}: ${error.message}` : error.message });
      this.status(`refused: ${error.message}`);
      return EXIT.refused;
    }
    this.emit(CLIENT_CONNECTED, {});
    this.status('connected');
    if (this.o.mic && source !== null) source.start(this);
    else this.say(talk.opening(), true);
    const deadline = now() + this.o.duration;
    try {
      while (now() < deadline) {
        if (this.lost.isSet()) {
          if (!await this.recover(deadline)) return EXIT.unanswered;
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
          return EXIT.answered;
        }
        await sleep(WATCH_TICK_S);
      }
      return talk.done() ? EXIT.answered : EXIT.unanswered;
    } finally {
      this.leaving = true;
      this.watching = null;
      source?.stop();
    }
  }
}
