// The client's side of the booking conversation (conversation.py's BookingConversation), and the
// booking backend it hands the calls to over HTTP.

import { CLIENT_ASK, CLIENT_STATUS_NOTE, CLIENT_TOOL_RESPONSE } from './events.mjs';
import { Flag, within } from './timing.mjs';

/** The booking backend's routes (faultlab/scenarios/booking/service.py) at `base`. */
export class Backend {
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
export class BookingConversation {
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
        this.emit(CLIENT_TOOL_RESPONSE, { id: callId, booking: booking.id });
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
      this.emit(CLIENT_STATUS_NOTE, { booking: booking.id, status: booking.status });
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
    this.emit(CLIENT_ASK, { text: this.o.ask });
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
