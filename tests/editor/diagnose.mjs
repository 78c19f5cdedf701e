// What an editor says of YAML files: yaml-language-server (VS Code's YAML extension's server)
// over the Language Server Protocol on stdio, each file opened as a document, its diagnostics
// printed as JSON ({"FILE": [{"line": 1-based, "message", "severity"}]}). The schema is each
// file's own `# yaml-language-server: $schema=...` line; nothing is fetched (no schema store).
//
//   node diagnose.mjs FILE...
import {spawn} from "node:child_process";
import {readFileSync} from "node:fs";
import {createRequire} from "node:module";
import {resolve} from "node:path";
import {pathToFileURL} from "node:url";

const SETTINGS = {
  yaml: {validate: true, hover: false, completion: false, format: {enable: false},
    schemaStore: {enable: false}, schemas: {}, yamlVersion: "1.2"},
};
const QUIET_MS = 1500; // no new diagnostics for this long once every file has had some: done
const LIMIT_MS = 60000;

const files = process.argv.slice(2).map((f) => resolve(f));
const server = createRequire(import.meta.url).resolve("yaml-language-server/bin/yaml-language-server");
const child = spawn(process.execPath, [server, "--stdio"], {stdio: ["pipe", "pipe", "inherit"]});

let nextId = 1;
const send = (message) => {
  const body = Buffer.from(JSON.stringify({jsonrpc: "2.0", ...message}));
  child.stdin.write(`Content-Length: ${body.length}\r\n\r\n`);
  child.stdin.write(body);
};
const request = (method, params) => send({id: nextId++, method, params});
const notify = (method, params) => send({method, params});

const uris = new Map(files.map((f) => [pathToFileURL(f).href, f]));
const diagnostics = new Map();
let quiet = null;

function finish(code) {
  clearTimeout(quiet);
  const out = {};
  for (const [uri, file] of uris) {
    out[file] = (diagnostics.get(uri) || []).map((d) => ({
      line: d.range.start.line + 1, message: d.message, severity: d.severity}));
  }
  process.stdout.write(JSON.stringify(out, null, 1) + "\n");
  child.kill();
  process.exit(code);
}

function received(message) {
  if (message.id === 1 && message.result) { // initialize answered
    notify("initialized", {});
    notify("workspace/didChangeConfiguration", {settings: SETTINGS});
    for (const [uri, file] of uris) {
      notify("textDocument/didOpen", {textDocument: {uri, languageId: "yaml", version: 1,
        text: readFileSync(file, "utf8")}});
    }
    return;
  }
  if (message.method === "workspace/configuration") {
    send({id: message.id, result: message.params.items.map((item) =>
      item.section === "yaml" ? SETTINGS.yaml : item.section?.startsWith("yaml.") ?
        SETTINGS.yaml[item.section.slice(5)] ?? null : null)});
    return;
  }
  if (message.id !== undefined && message.method) { // any other request of the server's
    send({id: message.id, result: null});
    return;
  }
  if (message.method === "textDocument/publishDiagnostics" && uris.has(message.params.uri)) {
    diagnostics.set(message.params.uri, message.params.diagnostics);
    if (diagnostics.size === uris.size) {
      clearTimeout(quiet);
      quiet = setTimeout(() => finish(0), QUIET_MS);
    }
  }
}

let buffer = Buffer.alloc(0);
child.stdout.on("data", (chunk) => {
  buffer = Buffer.concat([buffer, chunk]);
  for (;;) {
    const end = buffer.indexOf("\r\n\r\n");
    if (end < 0) return;
    const length = Number(/Content-Length: (\d+)/i.exec(buffer.subarray(0, end).toString())[1]);
    if (buffer.length < end + 4 + length) return;
    received(JSON.parse(buffer.subarray(end + 4, end + 4 + length).toString()));
    buffer = buffer.subarray(end + 4 + length);
  }
});
child.on("exit", (code) => {
  process.stderr.write(`yaml-language-server exited (${code}) before it was done\n`);
  process.exit(2);
});
setTimeout(() => {
  process.stderr.write(`no diagnostics for every file within ${LIMIT_MS / 1000} s\n`);
  finish(3);
}, LIMIT_MS).unref();

request("initialize", {processId: process.pid, rootUri: null, capabilities: {
  workspace: {configuration: true, didChangeConfiguration: {dynamicRegistration: false}},
  textDocument: {publishDiagnostics: {}}}});
