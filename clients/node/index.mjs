// Covel's public API (covel.scheduler.v1) for Node.js: connect() gives a client whose reads are sent again while the
// scheduler is UNAVAILABLE and whose turns (SubmitActions) are sent again, with the same idempotency key, while the
// error carries RetryInfo (the kernel's docs/retries.md); every failure is a CovelError with its google.rpc details
// decoded. The .proto files ship in protos/ (make clients copies them from the kernel's protos/).

import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import protobuf from "protobufjs";

const PROTOS = path.join(path.dirname(fileURLToPath(import.meta.url)), "protos");
const LOADING = { includeDirs: [PROTOS], keepCase: true, longs: String, enums: String, defaults: true, oneofs: true };
const definition = protoLoader.loadSync("covel/scheduler/v1/scheduler.proto", LOADING);
export const api = grpc.loadPackageDefinition(definition).covel.scheduler.v1;

const details = new protobuf.Root();
details.resolvePath = (_origin, target) => path.join(PROTOS, target);
details.loadSync(["google/rpc/status.proto", "google/rpc/error_details.proto"], { keepCase: true });
const Status = details.lookupType("google.rpc.Status");

const READ_RETRIES = 3;
const TURN_RETRIED = new Set([grpc.status.UNAVAILABLE, grpc.status.ABORTED, grpc.status.RESOURCE_EXHAUSTED]);
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** A failed call: its code, the stable reason (ErrorInfo) and the other details the server sent. */
export class CovelError extends Error {
  constructor(error) {
    super(error.details ?? error.message);
    this.code = error.code;
    this.codeName = Object.keys(grpc.status).find((name) => grpc.status[name] === error.code) ?? String(error.code);
    Object.assign(this, { reason: "", domain: "", metadata: {}, fieldViolations: [], resource: null, preconditions: [], retryAfterMs: null });
    const raw = error.metadata?.get("grpc-status-details-bin")?.[0];
    if (raw) for (const detail of Status.decode(raw).details) this.#take(detail);
  }

  #take(detail) {
    const type = details.lookupType(detail.type_url.split("/").pop());
    const value = type.toObject(type.decode(detail.value), { longs: Number, defaults: true });
    switch (type.fullName) {
      case ".google.rpc.ErrorInfo": Object.assign(this, { reason: value.reason, domain: value.domain, metadata: value.metadata ?? {} }); break;
      case ".google.rpc.BadRequest": this.fieldViolations.push(...value.field_violations.map((v) => [v.field, v.description])); break;
      case ".google.rpc.ResourceInfo": this.resource = [value.resource_type, value.resource_name]; break;
      case ".google.rpc.PreconditionFailure": this.preconditions.push(...value.violations.map((v) => [v.type, v.subject, v.description])); break;
      case ".google.rpc.RetryInfo": this.retryAfterMs = Number(value.retry_delay?.seconds ?? 0) * 1000 + Math.round((value.retry_delay?.nanos ?? 0) / 1e6); break;
      default: break;
    }
  }
}

/** The events one message of a turn stream carries: a batch's (a request's batch_events), or the message itself. */
export function eventsOf(message) {
  return message.event === "batch" ? message.batch.events : [message];
}

/** A client of the scheduler at `addr`. Options: token (sent as a bearer token), caFile (a scheduler serving TLS),
 * serverName, retryForMs (how long a turn is sent again, 30 s). */
export function connect(addr, { token, caFile, serverName, retryForMs = 30_000 } = {}) {
  const credentials = caFile ? grpc.credentials.createSsl(readFileSync(caFile)) : grpc.credentials.createInsecure();
  const stub = new api.Scheduler(addr, credentials, serverName ? { "grpc.ssl_target_name_override": serverName } : {});
  const metadata = () => {
    const md = new grpc.Metadata();
    if (token) md.set("authorization", `Bearer ${token}`);
    return md;
  };
  const once = (method, request) => new Promise((resolve, reject) =>
    stub[method](request, metadata(), (error, reply) => (error ? reject(new CovelError(error)) : resolve(reply))));

  async function read(method, request) {
    for (let attempt = 0; ; attempt += 1) {
      try {
        return await once(method, request);
      } catch (error) {
        if (error.code !== grpc.status.UNAVAILABLE || attempt === READ_RETRIES) throw error;
        await sleep(Math.min(1000, 100 * 2 ** attempt));
      }
    }
  }

  // The turn's events one by one: the stream sends those ready together as one batch (batch_events), opened here.
  async function* submit(sessionId, text, { kind = "act", idempotencyKey = randomUUID() } = {}) {
    const request = { session_id: sessionId, idempotency_key: idempotencyKey, actions: [{ kind, text }], batch_events: true };
    const giveUp = Date.now() + retryForMs;
    for (;;) {
      let started = false;
      try {
        for await (const message of stub.SubmitActions(request, metadata())) {
          started = true;
          yield* eventsOf(message);
        }
        return;
      } catch (raw) {
        const error = raw instanceof CovelError ? raw : new CovelError(raw);
        const wait = error.retryAfterMs ?? 1000;
        const retried = TURN_RETRIED.has(error.code) && (error.retryAfterMs !== null || error.code === grpc.status.UNAVAILABLE);
        if (started || !retried || Date.now() + wait > giveUp) throw error;
        await sleep(wait);
      }
    }
  }

  return {
    stub,
    createSession: async (request = {}) => (await once("CreateSession", request)).session,
    getSession: async (sessionId) => (await read("GetSession", { session_id: sessionId })).session,
    async *turns(sessionId, pageSize = 50) {
      let token = "";
      do {
        const page = await read("ListTurns", { session_id: sessionId, page_size: pageSize, page_token: token });
        yield* page.turns;
        token = page.next_page_token;
      } while (token);
    },
    submit,
    async play(sessionId, text, options) {
      let completed = null;
      for await (const event of submit(sessionId, text, options)) if (event.event === "turn_completed") completed = event.turn_completed;
      if (completed === null) throw new Error("the turn's stream ended without its record");
      return completed;
    },
    close: () => stub.close(),
  };
}
