// A Node.js client of Covel's scheduler (covel.scheduler.v1.Scheduler), with no generated code:
// @grpc/proto-loader reads the .proto files of protos/ at run time.
//
//   node client.mjs --addr 127.0.0.1:50150 "I open the door" "I go inside"
//
// Creates a session (or continues --session), submits each argument as one `do` action (SubmitActions: a server stream
// of TurnEvents), collects the streamed story text and the recorded turn, reads the turns back
// with GetTurn and ListTurns, and prints everything as one JSON object on stdout.
// COVEL_API_TOKEN, when set, is sent as `authorization: Bearer <token>`.

import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";

import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";

const require = createRequire(import.meta.url);
const GRPC_JS_VERSION = require("@grpc/grpc-js/package.json").version;
const here = path.dirname(fileURLToPath(import.meta.url));
const PROTOS = path.resolve(here, "..", "..", "..", "protos");

const { values: options, positionals: actions } = parseArgs({
  allowPositionals: true,
  options: {
    addr: { type: "string", default: process.env.COVEL_SCHEDULER_ADDR ?? "127.0.0.1:50150" },
    plugin: { type: "string", multiple: true, default: [] },
    exclude: { type: "string", multiple: true, default: [] }, // leave these (core) plugins out
    session: { type: "string" }, // continue this session instead of creating one
    "deadline-s": { type: "string", default: "60" },
  },
});
if (actions.length === 0) {
  console.error('usage: node client.mjs [--addr HOST:PORT] [--plugin ID]... [--exclude ID]... [--session ID] "action" ["action"...]');
  process.exit(2);
}

const definition = protoLoader.loadSync("covel/scheduler/v1/scheduler.proto", {
  includeDirs: [PROTOS],
  keepCase: true, // field names as in the .proto (session_id), like every other client
  longs: String, // int64 as decimal strings: no precision lost
  enums: String, // TURN_STATUS_COMMITTED rather than 1
  defaults: true,
  oneofs: true, // event.event names which field of the oneof is set
});
const { Scheduler } = grpc.loadPackageDefinition(definition).covel.scheduler.v1;
const client = new Scheduler(options.addr, grpc.credentials.createInsecure());

function metadata() {
  const md = new grpc.Metadata();
  if (process.env.COVEL_API_TOKEN) md.set("authorization", `Bearer ${process.env.COVEL_API_TOKEN}`);
  return md;
}

function callOptions() {
  return { deadline: new Date(Date.now() + Number(options["deadline-s"]) * 1000) };
}

function unary(method, request) {
  return new Promise((resolve, reject) => {
    client[method](request, metadata(), callOptions(), (error, reply) => (error ? reject(error) : resolve(reply)));
  });
}

// One turn: every event of the stream, the story text as streamed (a `reset` delta discards what
// that runtime streamed so far), and the turn_completed event's turn.
function submit(sessionId, text, idempotencyKey) {
  return new Promise((resolve, reject) => {
    const stream = client.SubmitActions(
      { session_id: sessionId, actions: [{ kind: "do", text }], idempotency_key: idempotencyKey },
      metadata(),
      callOptions(),
    );
    const kinds = [];
    const streamedByRuntime = new Map();
    let completed = null;
    stream.on("data", (event) => {
      kinds.push(event.event);
      if (event.event === "narrative_delta") {
        const delta = event.narrative_delta;
        const sofar = delta.reset ? "" : streamedByRuntime.get(delta.runtime_id) ?? "";
        streamedByRuntime.set(delta.runtime_id, sofar + delta.text);
      } else if (event.event === "turn_completed") {
        completed = event.turn_completed;
      }
    });
    stream.on("error", reject);
    stream.on("end", () => {
      if (completed === null) reject(new Error(`stream ended without turn_completed (events: ${kinds.join(", ")})`));
      else resolve({ kinds, streamed: [...streamedByRuntime.values()].join(""), turn: completed });
    });
  });
}

function summary(turn) {
  return {
    id: turn.id,
    logical_turn: turn.logical_turn,
    status: turn.status,
    player_message: turn.player_message,
    narrative: turn.narrative,
    origin: turn.origin,
    abort_reason: turn.abort_reason,
    runtime_results: turn.runtime_results.map((result) => ({
      runtime_id: result.runtime_id,
      plugin_id: result.plugin_id,
      status: result.status,
      story: result.story,
    })),
  };
}

async function main() {
  const session = options.session
    ? (await unary("GetSession", { session_id: options.session })).session
    : (await unary("CreateSession", { requested_plugins: options.plugin, excluded_plugins: options.exclude })).session;
  const turns = [];
  for (const [index, text] of actions.entries()) {
    const { kinds, streamed, turn } = await submit(session.id, text, `node-${session.id}-${index}`);
    const counts = {};
    for (const kind of kinds) counts[kind] = (counts[kind] ?? 0) + 1;
    turns.push({
      action: text,
      events: { first: kinds[0], last: kinds.at(-1), counts },
      streamed_text: streamed,
      turn: summary(turn),
    });
  }
  const fetched = [];
  for (const { turn } of turns) {
    fetched.push(summary((await unary("GetTurn", { session_id: session.id, turn_id: turn.id })).turn));
  }
  const listed = (await unary("ListTurns", { session_id: session.id })).turns.map(summary);
  const result = {
    client: { node: process.version, grpc_js: GRPC_JS_VERSION },
    session: { id: session.id, active_plugins: session.active_plugins },
    turns,
    get_turn: fetched,
    list_turns: listed,
  };
  process.stdout.write(JSON.stringify(result, null, 2) + "\n");
}

main()
  .catch((error) => {
    // gRPC errors carry the status code name the server chose; say it, then fail.
    const code = error.code !== undefined ? `${grpc.status[error.code] ?? error.code}: ` : "";
    console.error(`covel node client: ${code}${error.details ?? error.message}`);
    process.exitCode = 1;
  })
  .finally(() => client.close());
