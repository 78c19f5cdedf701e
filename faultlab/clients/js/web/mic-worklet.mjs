// The page's microphone tap, as an AudioWorklet processor (in an AudioContext at 16 kHz): the
// input's first channel as 16-bit PCM, posted to the page in 40 ms pieces (the buffer transferred).

const PIECE_SAMPLES = 640; // 40 ms at 16 kHz

class PcmPieces extends AudioWorkletProcessor {
  constructor() {
    super();
    this.piece = new Int16Array(PIECE_SAMPLES);
    this.filled = 0;
  }

  process(inputs) {
    const samples = inputs[0]?.[0];
    if (samples === undefined) return true;
    for (const sample of samples) {
      const clipped = Math.max(-1, Math.min(1, sample));
      this.piece[this.filled++] = clipped < 0 ? clipped * 0x8000 : clipped * 0x7fff;
      if (this.filled === PIECE_SAMPLES) {
        this.port.postMessage(this.piece.buffer, [this.piece.buffer]);
        this.piece = new Int16Array(PIECE_SAMPLES);
        this.filled = 0;
      }
    }
    return true;
  }
}

registerProcessor('pcm-pieces', PcmPieces);
