// Builds the reference web page's bundle (web/dist/, not committed) with esbuild: web/page.mjs with
// booking.mjs and @google/genai's browser build, and the microphone's AudioWorklet processor, as
// files the page loads from its own origin (no CDN). `make install` runs it after `npm ci`.

import { build } from 'esbuild';
import { fileURLToPath } from 'node:url';

const web = fileURLToPath(new URL('web/', import.meta.url));

await build({
  entryPoints: { page: `${web}page.mjs`, 'mic-worklet': `${web}mic-worklet.mjs` },
  outdir: `${web}dist`,
  bundle: true,
  format: 'esm',
  platform: 'browser',
  target: 'chrome120',
  sourcemap: true,
  logLevel: 'warning',
});
