// The booking conversation's script, as faultlab/scenarios/booking/conversation.json declares it
// for the Python and the JavaScript reference clients alike (faultlab/scenarios/booking/script.py
// reads the same file): the phrases, the tool, the timing defaults, the model, the exit codes.
// Node reads the JSON from the file; the page's bundle (build.mjs) has it inlined by esbuild.

import { Behavior } from '@google/genai';

import script from '../../scenarios/booking/conversation.json' with { type: 'json' };

const camel = (name) => name.replace(/_([a-z])/g, (_, letter) => letter.toUpperCase());

export const DEFAULTS = Object.freeze({
  say: script.say,
  ask: script.ask,
  // askAfter, retryAfter, window, connectTimeout, pingInterval (Node), lostAfter (Node: no frame
  // nor pong; a page: see watchSilence), quiet, duration: seconds.
  ...Object.fromEntries(Object.entries(script.defaults_s).map(([name, s]) => [camel(name), s])),
  model: script.models.gemini,
  audio: false, // spoken replies (24 kHz audio with a transcript) instead of text
  mic: false, // speak through the environment's microphone instead of typing `say`
  statusNote: true, // restore a new session with the backend's status lines
});

/** The exit codes: answered, refused (the first connection), unanswered. */
export const EXIT = Object.freeze({ ...script.exit_codes });

/** A JSON Schema in the Live API's spelling (its types upper-case: Type.OBJECT is 'OBJECT'). */
function liveSchema(schema) {
  const spelt = { ...schema, type: String(schema.type).toUpperCase() };
  if (schema.properties !== undefined) {
    spelt.properties = Object.fromEntries(Object.entries(schema.properties)
      .map(([name, inner]) => [name, liveSchema(inner)]));
  }
  return spelt;
}

/** The function the model may call (book_slot(slot), NON_BLOCKING), as a Live API declaration:
 * a new one each time, as the SDK rewrites the declarations it is given in place. */
export function toolDeclaration() {
  return {
    name: script.tool.name,
    behavior: Behavior[script.tool.behavior],
    parameters: liveSchema(script.tool.parameters),
  };
}

const DURATION = /^\s*(\d+(?:\.\d+)?|\.\d+)\s*(ms|s|m|h)\s*$/;
const SECONDS_PER_UNIT = { ms: 0.001, s: 1, m: 60, h: 3600 };

/** Seconds in a duration as faultlab writes them (`500ms`, `2s`, `1.5m`): faultlab/units.py. */
export function parseDuration(text) {
  const match = DURATION.exec(String(text));
  if (match === null) throw new Error(`not a duration: '${text}' (write e.g. '1.5s', '200ms')`);
  return Number(match[1]) * SECONDS_PER_UNIT[match[2]];
}
