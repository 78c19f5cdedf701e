// The booking conversation over OpenAI Realtime's WebRTC, in the page (page.mjs, webrtc=1): what
// the Python `openai-webrtc` client does (faultlab/clients/webrtc.py), as a browser app does it.
// The page's own server holds the key (faultlab/clients/call_relay.py): it hands the page its ICE
// servers (/call/ice: the lab's TURN server, if any) and creates the call from the page's offer
// (/call/offer). The microphone is a track of the call (mic=1), opened once the call is up (the
// lab's fake capture plays the utterances from its opening); typed, the request is an item.
// Events: the conversation's (conversation.mjs), client.ice (each ICE connection state),
// client.candidate_pair (the pair ICE chose, from getStats), client.audio_stats every second (the
// model's voice as the page's player took it: RTCInboundRtpStreamStats), client.lost (why: the
// call's ICE failed, or stayed disconnected `lostAfter`, or its channel closed). The service
// resumes nothing: a lost call is given up (exit 3), as openai-webrtc does.

import { Backend, BookingConversation } from '../conversation.mjs';
import {
  CLIENT_ANSWER, CLIENT_AUDIO_STATS, CLIENT_CANDIDATE_PAIR, CLIENT_CONNECTED, CLIENT_ERROR,
  CLIENT_ICE, CLIENT_LOST, CLIENT_RECEIVED, CLIENT_REFUSED, CLIENT_TOOL_CALL,
} from '../events.mjs';
import { EXIT } from '../script.mjs';
import { Flag, now, round, sleep, within } from '../timing.mjs';

const CHANNEL = 'oai-events';
const STATS_EVERY_S = 1.0;
const TICK_S = 0.05;
// The stream's bookkeeping, left out of client.received (as faultlab/clients/realtime.py).
const QUIET_KINDS = new Set(['response.output_audio.delta', 'response.output_audio_transcript.delta',
  'response.output_text.delta', 'response.function_call_arguments.delta', 'rate_limits.updated']);

export class WebRtcCall {
  /** `host`: emit(name, fields), backend (the booking backend's URL), relay (the call relay's:
   * /call), status(text). */
  constructor(options, host) {
    this.o = options;
    this.host = host;
    this.emit = host.emit;
    this.talk = new BookingConversation(this, options, new Backend(host.backend));
    this.pc = null;
    this.channel = null;
    this.audio = null; // the call's audio transceiver: the microphone's track once it opens
    this.up = new Flag();
    this.lost = new Flag();
    this.idle = new Flag(); // no response under way: the service refuses a second one
    this.idle.set();
    this.generation = 0; // one call: its calls are always answerable
    this.leaving = false;
    this.speaking = false;
    this.answer = [];
    this.lastMessage = now();
    this.disconnectedAt = null;
    this.tasks = new Set();
  }

  status(text) { this.host.status?.(text); }

  spawn(promise) {
    const task = promise.catch((error) => {
      if (!this.leaving) this.emit(CLIENT_ERROR, { error: String(error?.message ?? error).slice(0, 200) });
    }).finally(() => this.tasks.delete(task));
    this.tasks.add(task);
  }

  #send(event) {
    if (this.channel === null || this.channel.readyState !== 'open') throw new Error('the call is not open');
    this.channel.send(JSON.stringify(event));
  }

  /** response.create once the response under way (if any) is done. */
  async #respond() {
    await this.idle.wait();
    this.idle.clear();
    this.#send({ type: 'response.create' });
  }

  say(turns, turnComplete) {
    for (const [role, text] of turns) {
      this.#send({ type: 'conversation.item.create',
        item: { type: 'message', role, content: [{ type: 'input_text', text }] } });
    }
    if (turnComplete) this.spawn(this.#respond());
  }

  answerCall(callId, name, response) {
    this.#send({ type: 'conversation.item.create',
      item: { type: 'function_call_output', call_id: callId, output: JSON.stringify(response) } });
    this.spawn(this.#respond());
  }

  async drop(why) {
    if (this.lost.isSet() || this.leaving) return;
    this.lost.set();
    if (!this.up.isSet()) return; // not up yet: the attempt is refused (run), not lost
    this.emit(CLIENT_LOST, { why });
    this.status(`lost (${why})`);
    this.up.clear();
  }

  #onEvent(event) {
    this.lastMessage = now();
    const kind = String(event.type);
    if (kind === 'response.created') { // the client's, or one the service's VAD began
      this.speaking = true;
      this.idle.clear();
    }
    if (kind === 'response.function_call_arguments.done') {
      let args = {};
      try { args = JSON.parse(event.arguments || '{}'); } catch { /* the model's own mistake */ }
      this.emit(CLIENT_TOOL_CALL, { id: event.call_id, name: event.name, args });
      this.status(`booking (${event.name})`);
      this.talk.onCall(String(event.call_id), String(event.name), args);
    }
    if (kind === 'response.output_text.delta' || kind === 'response.output_audio_transcript.delta') {
      this.answer.push(event.delta);
    }
    if (kind === 'response.done' || kind === 'error') {
      this.speaking = false;
      this.idle.set();
    }
    if (kind === 'response.done' && this.answer.length > 0) {
      const text = this.answer.join('');
      this.answer = [];
      this.emit(CLIENT_ANSWER, { text });
      this.status(`the model: ${text}`);
      this.talk.onReply();
    }
    if (kind === 'error') {
      this.emit(CLIENT_ERROR, { code: event.error?.code ?? null, message: String(event.error?.message ?? '') });
    }
    if (!QUIET_KINDS.has(kind)) this.emit(CLIENT_RECEIVED, { kind });
  }

  async #relay(route, init) {
    const answer = await fetch(`${this.host.relay}/${route}`, init);
    const body = await answer.json();
    if (!answer.ok) throw Object.assign(new Error(body.error ?? `${route}: ${answer.status}`), { status: answer.status });
    return body;
  }

  /** The call: ICE servers from the relay, the microphone's track (or a transceiver that only
   * receives), the events' channel, the offer once its candidates are gathered (the service
   * takes no trickled ones), the answer; resolves once the channel is open. */
  async #connect() {
    const { iceServers } = await this.#relay('ice');
    const pc = new RTCPeerConnection({ iceServers });
    this.pc = pc;
    pc.oniceconnectionstatechange = () => this.#ice(pc.iceConnectionState);
    this.audio = pc.addTransceiver('audio', { direction: 'sendrecv' });
    pc.ontrack = ({ streams, track }) => {
      // Played (muted by the lab's browser), so that the jitter buffer runs as in an app.
      const player = new Audio();
      player.srcObject = streams[0] ?? new MediaStream([track]);
      player.play().catch(() => {});
    };
    const channel = pc.createDataChannel(CHANNEL);
    this.channel = channel;
    const opened = new Promise((resolve) => { channel.onopen = resolve; });
    channel.onmessage = ({ data }) => this.#onEvent(JSON.parse(data));
    channel.onclose = () => { if (!this.leaving) this.drop('the channel closed'); };
    await pc.setLocalDescription(await pc.createOffer());
    // The service takes no trickled candidates: those gathered by the connect timeout go.
    await within(new Promise((resolve) => {
      if (pc.iceGatheringState === 'complete') resolve();
      pc.onicegatheringstatechange = () => { if (pc.iceGatheringState === 'complete') resolve(); };
    }), this.o.connectTimeout);
    const { sdp } = await this.#relay('offer', { method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ sdp: pc.localDescription.sdp }) });
    await pc.setRemoteDescription({ type: 'answer', sdp });
    await within(Promise.race([opened, this.lost.wait()]), this.o.connectTimeout);
    if (channel.readyState !== 'open') throw new Error('the call\'s channel never opened');
  }

  #ice(state) {
    this.emit(CLIENT_ICE, { state });
    if (state === 'connected' || state === 'completed') {
      this.disconnectedAt = null;
      this.spawn(this.#pair());
    } else if (state === 'disconnected') {
      this.disconnectedAt = now();
    } else if (state === 'failed') {
      this.drop('ICE failed');
    }
  }

  /** The pair ICE chose, as the Python client says it (faultlab/vocabulary/webrtc.py). */
  async #pair() {
    const stats = await this.pc.getStats();
    const transport = [...stats.values()].find((s) => s.type === 'transport');
    const pair = stats.get(transport?.selectedCandidatePairId);
    if (pair === undefined) return;
    const local = stats.get(pair.localCandidateId);
    const remote = stats.get(pair.remoteCandidateId);
    this.emit(CLIENT_CANDIDATE_PAIR, {
      local: local.candidateType, remote: remote.candidateType, protocol: local.protocol,
      local_address: `${local.address}:${local.port}`, remote_address: `${remote.address}:${remote.port}`,
      ...(local.relayProtocol ? { turn: local.relayProtocol } : {}) });
  }

  /** Every second, the model's voice as the player took it. */
  async #stats() {
    while (!this.leaving && this.pc !== null) {
      await sleep(STATS_EVERY_S);
      if (this.pc.connectionState === 'closed') return;
      const stats = await this.pc.getStats();
      const inbound = [...stats.values()].find((s) => s.type === 'inbound-rtp' && s.kind === 'audio');
      if (inbound === undefined || !inbound.totalSamplesReceived) continue;
      const rate = stats.get(inbound.codecId)?.clockRate ?? 48000;
      const concealed = inbound.concealedSamples ?? 0;
      const total = inbound.totalSamplesReceived;
      this.emit(CLIENT_AUDIO_STATS, {
        received_s: round((total - concealed) / rate, 3), concealed_s: round(concealed / rate, 3),
        concealed: round(concealed / total, 4), packets_received: inbound.packetsReceived ?? 0,
        packets_lost: inbound.packetsLost ?? 0, jitter_ms: round((inbound.jitter ?? 0) * 1000, 2) });
    }
  }

  /** The conversation, speaking into the microphone (`openMicrophone()`, a MediaStream's
   * promise) when given; the exit code. */
  async run(openMicrophone = null) {
    this.status('calling');
    try {
      await this.#connect();
    } catch (error) {
      this.emit(CLIENT_REFUSED, { code: error.status ?? null, reason: String(error.message).slice(0, 200) });
      this.status(`refused: ${error.message}`);
      this.#hangUp();
      return EXIT.refused;
    }
    this.up.set();
    this.emit(CLIENT_CONNECTED, {});
    this.status('connected');
    this.spawn(this.#stats());
    const deadline = now() + this.o.duration;
    const talk = this.talk;
    try {
      if (openMicrophone !== null) {
        const microphone = await openMicrophone();
        await this.audio.sender.replaceTrack(microphone.getAudioTracks()[0]);
      } else {
        this.say(this.talk.opening(), true);
      }
      while (now() < deadline) {
        if (this.disconnectedAt !== null && now() - this.disconnectedAt > this.o.lostAfter) {
          await this.drop(`ICE disconnected for ${this.o.lostAfter} s`);
        }
        if (this.lost.isSet()) return EXIT.unanswered;
        if (talk.askDue(this.speaking)) {
          await talk.ask(() => this.speaking);
          continue;
        }
        if (talk.done() && now() - this.lastMessage > this.o.quiet) return EXIT.answered;
        await sleep(TICK_S);
      }
      return talk.done() ? EXIT.answered : EXIT.unanswered;
    } finally {
      this.leaving = true;
      this.#hangUp();
    }
  }

  #hangUp() {
    this.leaving = true;
    try { this.channel?.close(); } catch { /* closed already */ }
    if (this.pc !== null && this.pc.connectionState !== 'closed') {
      this.pc.close();
      this.emit(CLIENT_ICE, { state: 'closed' });
    }
  }
}
