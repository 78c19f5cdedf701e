// faultlab's reference web page of the Live API: the booking conversation of booking.mjs in a
// browser, on @google/genai's browser build, as a voice app's page would hold it. Bundled with
// esbuild into dist/page.js (build.mjs); served with index.html from one origin, whose
// /backend/ is the booking backend (faultlab/browser/serve.py).
//
// Its options come from the URL's query: say, ask, model, apiKey ("not-a-real-key"), the
// durations askAfter (1s), retryAfter (1s), window (4s), lostAfter (3s), quiet (1.5s),
// duration (60s), connectTimeout (5s) written as faultlab writes them (500ms, 2s), mic=1 (speak
// from the microphone instead of typing `say`), audio=1 (spoken replies; on with mic=1),
// statusNote=0 (restore a new session without the backend's status lines), webrtc=1 (OpenAI
// Realtime over WebRTC instead: call.mjs, through the page's own server at /call/).
// Its events are console lines, `{"event": ..., ...fields}` as JSON (the browser driver stamps
// their time), the last one `client.done {code}`; it plays nothing, and shows a status line.

import { BookingClient, DEFAULTS, INPUT_RATE, parseDuration } from '../booking.mjs';
import { CLIENT_DONE, CLIENT_ERROR, UPLINK_ERROR, UPLINK_SOURCE_END, UPLINK_START } from '../events.mjs';
import { WebRtcCall } from './call.mjs';

const DURATIONS = ['askAfter', 'retryAfter', 'window', 'lostAfter', 'quiet', 'duration',
  'connectTimeout'];
// A page notices a silent loss only by the server's silence while a reply is owed (booking.mjs,
// watchSilence): a bit longer than Node's ping watch, as a model may think before it speaks.
const PAGE_LOST_AFTER_S = 3.0;
const statusLine = document.getElementById('status');
const log = document.getElementById('log');

function emit(event, fields = {}) {
  console.log(JSON.stringify({ event, ...fields }));
}

function show(text) {
  statusLine.textContent = text;
  log.textContent += `${new Date().toISOString().slice(11, 23)} ${text}\n`;
}

/** The client's options from the page's query (throws on a bad duration). */
function options(query) {
  const chosen = { lostAfter: PAGE_LOST_AFTER_S };
  for (const name of ['say', 'ask', 'model']) {
    if (query.has(name)) chosen[name] = query.get(name);
  }
  for (const name of DURATIONS) {
    if (query.has(name)) chosen[name] = parseDuration(query.get(name));
  }
  chosen.mic = query.get('mic') === '1';
  chosen.audio = query.get('audio') === '1';
  if (query.get('statusNote') === '0') chosen.statusNote = false;
  chosen.webrtc = query.get('webrtc') === '1';
  return { ...DEFAULTS, ...chosen };
}

// The microphone's capture, as a voice app asks for it: no echo cancelling, noise suppression or
// gain control (they would change what the lab plays in), one channel.
const CAPTURE = { audio: { echoCancellation: false, noiseSuppression: false, autoGainControl: false,
  channelCount: 1 } };

/** The microphone (CAPTURE), resampled by an AudioContext at 16 kHz, tapped by an AudioWorklet
 * into 40 ms pieces of 16-bit PCM, each sent at once on whatever connection is up (lost while
 * none is). */
class PageMicrophone {
  constructor() {
    this.context = null;
    this.stream = null;
    this.sent = 0;
    this.lost = 0;
  }

  start(client) {
    this.#open(client).catch((error) => {
      emit(UPLINK_ERROR, { error: `the microphone: ${error?.name ?? ''} ${error?.message ?? error}`.slice(0, 200) });
    });
  }

  async #open(client) {
    this.stream = await navigator.mediaDevices.getUserMedia(CAPTURE);
    this.context = new AudioContext({ sampleRate: INPUT_RATE });
    await this.context.audioWorklet.addModule(new URL('mic-worklet.js', import.meta.url));
    const tap = new AudioWorkletNode(this.context, 'pcm-pieces');
    tap.port.onmessage = ({ data }) => {
      if (client.sendAudio(new Uint8Array(data))) this.sent += data.byteLength;
      else this.lost += data.byteLength;
    };
    // Wired to the output through a muted gain, so that the graph pulls the tap; nothing plays.
    const mute = this.context.createGain();
    mute.gain.value = 0;
    this.context.createMediaStreamSource(this.stream).connect(tap).connect(mute)
      .connect(this.context.destination);
    await this.context.resume();
    emit(UPLINK_START, { keep_alive: null, rate: this.context.sampleRate });
  }

  stop() {
    for (const track of this.stream?.getTracks() ?? []) track.stop();
    this.context?.close().catch(() => {});
    const seconds = (n) => Math.round((n / 2 / INPUT_RATE) * 1000) / 1000;
    emit(UPLINK_SOURCE_END, { sent_s: seconds(this.sent), lost_s: seconds(this.lost) });
  }
}

/** The booking over a WebRTC call (call.mjs); the exit code. */
async function call(chosen) {
  const host = { emit, status: show, backend: new URL('/backend', window.location.href).href,
    relay: new URL('/call', window.location.href).href };
  let microphone = null;
  const open = async () => {
    microphone = await navigator.mediaDevices.getUserMedia(CAPTURE);
    return microphone;
  };
  try {
    return await new WebRtcCall(chosen, host).run(chosen.mic ? open : null);
  } catch (error) {
    emit(CLIENT_ERROR, { error: String(error?.stack ?? error).slice(0, 500) });
    return 1;
  } finally {
    for (const track of microphone?.getTracks() ?? []) track.stop();
  }
}

function done(code) {
  emit(CLIENT_DONE, { code });
  show(`done (exit ${code})`);
  document.body.dataset.done = String(code);
}

async function main() {
  window.addEventListener('error', (event) => {
    emit(CLIENT_ERROR, { error: String(event.message).slice(0, 200) });
  });
  window.addEventListener('unhandledrejection', (event) => {
    emit(CLIENT_ERROR, { error: String(event.reason?.message ?? event.reason).slice(0, 200) });
  });
  const query = new URLSearchParams(window.location.search);
  let chosen;
  try {
    chosen = options(query);
  } catch (error) {
    emit(CLIENT_ERROR, { error: error.message });
    done(2);
    return;
  }
  if (chosen.webrtc) {
    done(await call(chosen));
    return;
  }
  const client = new BookingClient(chosen, {
    emit, backend: new URL('/backend', window.location.href).href,
    apiKey: query.get('apiKey') ?? 'not-a-real-key', watch: 'silence', status: show });
  let code;
  try {
    code = await client.run(chosen.mic ? new PageMicrophone() : null);
  } catch (error) {
    emit(CLIENT_ERROR, { error: String(error?.stack ?? error).slice(0, 500) });
    code = 1;
  }
  done(code);
}

main();
