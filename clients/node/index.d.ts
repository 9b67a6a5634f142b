// Types of @covel/client (index.mjs). Messages are plain objects with the .proto's field names (session_id),
// int64 as decimal strings and enums as their names (TURN_STATUS_COMMITTED), as @grpc/proto-loader gives them.

export type Message = Record<string, any>;

export declare class CovelError extends Error {
  code: number;
  codeName: string;
  reason: string;
  domain: string;
  metadata: Record<string, string>;
  fieldViolations: Array<[field: string, description: string]>;
  resource: [type: string, name: string] | null;
  preconditions: Array<[type: string, subject: string, description: string]>;
  retryAfterMs: number | null;
}

export interface ConnectOptions {
  token?: string;
  caFile?: string;
  serverName?: string;
  retryForMs?: number;
}

export interface CovelClient {
  stub: any;
  createSession(request?: Message): Promise<Message>;
  getSession(sessionId: string): Promise<Message>;
  turns(sessionId: string, pageSize?: number): AsyncGenerator<Message>;
  // The turn's events one by one (never a batch: the stream's batches are opened).
  submit(sessionId: string, text: string, options?: { kind?: string; idempotencyKey?: string }): AsyncGenerator<Message>;
  play(sessionId: string, text: string, options?: { kind?: string; idempotencyKey?: string }): Promise<Message>;
  close(): void;
}

export declare const api: any;
export declare function connect(addr: string, options?: ConnectOptions): CovelClient;
export declare function eventsOf(message: Message): Message[];
