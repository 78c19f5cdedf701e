// faultlab's Node reference client of the Live API (the builtin `node-booking` runs it beside
// the booking backend: faultlab/clients/node.py): the booking conversation of booking.mjs, on
// @google/genai as an app would use it (`new GoogleGenAI({apiKey})`, the SDK's default service
// URL; the lab resolves the service's names to its target and NODE_EXTRA_CA_CERTS trusts its CA).
//
// Its environment: FAULTLAB_BACKEND (the backend's base URL, http://127.0.0.1:PORT/backend),
// GOOGLE_API_KEY, FAULTLAB_EVENTS (the events, one JSON line each, appended with one write), and
// with --mic FAULTLAB_MIC (the lab's microphone: a unix socket handing 16 kHz 16-bit mono PCM at
// real-time rate, faultlab/mic.py), streamed in 100 ms messages as the Python clients' uplink does
// (without its keep-alive: the lab's microphone never stalls unless a profile makes it).
// A lost connection is noticed by its own pings (every --ping-interval; lost when neither a frame
// nor a pong came for --lost-after) or its close. The last event is client.done {code}.

import fs from 'node:fs';
import net from 'node:net';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

import { BookingClient, DEFAULTS, INPUT_RATE, parseDuration } from './booking.mjs';
import { CLIENT_DONE, CLIENT_ERROR, UPLINK_ERROR, UPLINK_SOURCE_END, UPLINK_START } from './events.mjs';

const USAGE = `usage: node node.mjs [--say TEXT] [--ask TEXT] [--ask-after 1s] [--retry-after 1s]
       [--window 4s] [--connect-timeout 5s] [--ping-interval 500ms] [--lost-after 2s]
       [--quiet 1.5s] [--duration 60s] [--model gemini-3.8-live] [--audio] [--mic]
       [--no-status-note]
Durations are written as faultlab writes them: 500ms, 2s, 1.5m. Environment: FAULTLAB_BACKEND,
GOOGLE_API_KEY, FAULTLAB_EVENTS, FAULTLAB_MIC (with --mic).`;
const FRAME_BYTES = (INPUT_RATE / 10) * 2; // 100 ms of 16-bit mono PCM

const OPTIONS = {
  say: { type: 'string' },
  ask: { type: 'string' },
  'ask-after': { type: 'string', duration: 'askAfter' },
  'retry-after': { type: 'string', duration: 'retryAfter' },
  window: { type: 'string', duration: 'window' },
  'connect-timeout': { type: 'string', duration: 'connectTimeout' },
  'ping-interval': { type: 'string', duration: 'pingInterval' },
  'lost-after': { type: 'string', duration: 'lostAfter' },
  quiet: { type: 'string', duration: 'quiet' },
  duration: { type: 'string', duration: 'duration' },
  model: { type: 'string' },
  audio: { type: 'boolean' },
  mic: { type: 'boolean' },
  'no-status-note': { type: 'boolean' },
  help: { type: 'boolean' },
};

/** The client's options from the command line (throws on a bad one). */
export function options(argv) {
  const { values } = parseArgs({ args: argv, strict: true, allowPositionals: false,
    options: Object.fromEntries(Object.entries(OPTIONS).map(([k, v]) => [k, { type: v.type }])) });
  const chosen = {};
  for (const [name, value] of Object.entries(values)) {
    const spec = OPTIONS[name];
    if (spec.duration) chosen[spec.duration] = parseDuration(value);
    else if (name === 'no-status-note') chosen.statusNote = false;
    else chosen[name] = value;
  }
  return { ...DEFAULTS, ...chosen };
}

/** The Unix time in ms at performance.now()'s 0. Not performance.timeOrigin: Node reads the
 * wall clock and the monotonic one apart at start-up, and on a busy CI machine its stamps came
 * 1.1 ms late against the other processes' (a message the proxy forwarded before the event that
 * sent it). Measured here instead at three ticks of Date.now(), whose ms are exact there: the
 * latest reading (a read delayed after the tick makes the offset smaller). */
function wallOrigin() {
  let origin = -Infinity;
  for (let tick = 0; tick < 3; tick += 1) {
    const before = Date.now();
    let ms;
    while ((ms = Date.now()) === before) { /* until the next ms begins */ }
    origin = Math.max(origin, ms - performance.now());
  }
  return origin;
}

/** Events as lines appended to FAULTLAB_EVENTS, one write each (O_APPEND: whole lines beside the
 * backend's, which writes to the same file). */
function eventFile(path) {
  const fd = path ? fs.openSync(path, 'a', 0o600) : null;
  const origin = wallOrigin();
  return (name, fields = {}) => {
    if (fd === null) return;
    const ts = (origin + performance.now()) / 1000;
    fs.writeSync(fd, `${JSON.stringify({ event: name, ts, ...fields })}\n`);
  };
}

/** The lab's microphone (FAULTLAB_MIC), its audio sent as it comes in 100 ms messages. */
class Microphone {
  constructor(path, emit) {
    this.path = path;
    this.emit = emit;
    this.socket = null;
    this.buffer = Buffer.alloc(0);
    this.bytes = { source: 0, sent: 0, lost: 0 };
  }

  start(client) {
    if (!this.path) {
      this.emit(UPLINK_ERROR, { error: 'FAULTLAB_MIC is not set: no microphone' });
      return;
    }
    this.socket = net.createConnection(this.path);
    this.socket.on('connect', () => this.emit(UPLINK_START, { keep_alive: null }));
    this.socket.on('error', (error) => {
      this.emit(UPLINK_ERROR, { error: `cannot read the microphone ${this.path}: ${error.message}` });
    });
    this.socket.on('data', (data) => {
      this.bytes.source += data.length;
      this.buffer = Buffer.concat([this.buffer, data]);
      while (this.buffer.length >= FRAME_BYTES) this.#send(client, this.buffer.subarray(0, FRAME_BYTES));
    });
    this.socket.on('end', () => {
      if (this.buffer.length > 0) this.#send(client, this.buffer);
      const seconds = (n) => Math.round((n / 2 / INPUT_RATE) * 1000) / 1000;
      this.emit(UPLINK_SOURCE_END, { source_s: seconds(this.bytes.source),
        sent_s: seconds(this.bytes.sent), lost_s: seconds(this.bytes.lost) });
    });
  }

  #send(client, frame) {
    this.buffer = this.buffer.subarray(frame.length);
    if (client.sendAudio(frame)) this.bytes.sent += frame.length;
    else this.bytes.lost += frame.length; // no connection: the audio is gone, as on a phone
  }

  stop() { this.socket?.destroy(); }
}

async function main() {
  let chosen;
  try {
    chosen = options(process.argv.slice(2));
  } catch (error) {
    process.stderr.write(`node-booking: ${error.message}\n`);
    process.exit(2);
  }
  if (chosen.help) {
    process.stdout.write(`${USAGE}\n`);
    process.exit(0);
  }
  const backend = process.env.FAULTLAB_BACKEND;
  if (!backend) {
    process.stderr.write('node-booking: FAULTLAB_BACKEND is not set (the booking backend\'s URL)\n');
    process.exit(2);
  }
  const emit = eventFile(process.env.FAULTLAB_EVENTS);
  const done = (code, fields = {}) => {
    emit(CLIENT_DONE, { code, ...fields });
    process.exit(code);
  };
  for (const [signal, number] of [['SIGTERM', 15], ['SIGINT', 2]]) {
    process.on(signal, () => done(128 + number, { signal }));
  }
  const client = new BookingClient(chosen, {
    emit, backend, apiKey: process.env.GOOGLE_API_KEY ?? process.env.GEMINI_API_KEY, watch: 'pings' });
  let code;
  try {
    code = await client.run(chosen.mic ? new Microphone(process.env.FAULTLAB_MIC, emit) : null);
  } catch (error) {
    emit(CLIENT_ERROR, { error: String(error?.stack ?? error).slice(0, 500) });
    process.stderr.write(`${error?.stack ?? error}\n`);
    code = 1;
  }
  done(code);
}

if (fileURLToPath(import.meta.url) === process.argv[1]) await main();
