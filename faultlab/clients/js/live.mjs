// The Live API's messages as faultlab reads them: their kind (`kindOf`), and the audio in them.

export const OUTPUT_RATE = 24000;
export const INPUT_RATE = 16000;

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
export function decodedLength(data) {
  const padding = data.endsWith('==') ? 2 : data.endsWith('=') ? 1 : 0;
  return Math.floor((data.length * 3) / 4) - padding;
}
