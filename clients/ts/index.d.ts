// Types of runloom-client (index.js), written by hand: the wire forms of
// docs/openapi.yaml (components/schemas) and the client's methods. A newer
// server may add fields; the index signatures leave room for them.

export type RunStatus =
  | 'queued' | 'running' | 'paused' | 'waiting' | 'completed' | 'rejected'
  | 'unresolved' | 'budget_stopped' | 'failed' | 'cancelled';
export type Decision = 'approve' | 'edit' | 'reject' | 'request_revision';
export type Role = 'viewer' | 'operator' | 'approver' | 'admin';

export interface StepCounts {
  revision: number;
  succeeded: number;
  failed: number;
  skipped: number;
  total: number;
}

export interface Gate {
  path: string;
  step_id: string;
  phase: string;
  proposal: unknown;
  proposal_digest: string;
  allow: string[];
  revision_phase: string;
  title: string;
}

export interface Run {
  id: string;
  workflow: string;
  workflow_version: number;
  workflow_digest: string;
  status: RunStatus;
  inputs: Record<string, unknown>;
  inputs_digest: string;
  idempotency_key: string;
  phase: string;
  revision: number;
  entry: 'fresh' | 'resume' | 'rerun' | 'revision';
  pending_gate: Gate | null;
  rerun_from: string;
  feedback: string;
  budget: {tenant: string; limit_micros: number | null} | null;
  lease_owner: string;
  lease_expires_at: string | null;
  attempts: number;
  max_attempts: number;
  concurrency_key: string;
  concurrency_limit: number;
  priority: number;
  cancel_requested: boolean;
  outcome: string;
  error: string;
  last_event_seq: number;
  created_at: string;
  updated_at: string;
  finished_at: string | null;
  waiting_for: {
    kind: 'timer' | 'signal' | 'child';
    signal: string | null;
    child_run_id: string | null;
    until: string | null;
    step_path: string | null;
  } | null;
  parent_run_id: string | null;
  parent_step_path: string | null;
  /** Only on getRun. */
  step_counts?: StepCounts;
  [key: string]: unknown;
}

export interface RunPage {
  runs: Run[];
  /** "" on the last page. */
  next_cursor: string;
}

export interface Step {
  path: string;
  step_id: string;
  kind: string;
  phase: string;
  revision: number;
  attempt: number;
  state: string;
  output: unknown;
  error: string;
  error_class: string;
  stderr_tail: string;
  started_at: string;
  finished_at: string;
  [key: string]: unknown;
}

export interface Write {
  path: string;
  action: string;
  decision: string;
  state: 'intent' | 'done';
  idempotency_key: string;
  request_digest: string;
  begins: number;
  http_status: number | null;
  source: 'sent' | 'lookup' | 'resent' | null;
  response: unknown;
  created_at: string;
  finished_at: string | null;
  [key: string]: unknown;
}

/** The event envelope of docs/formats/events.md. */
export interface Event {
  run_id: string;
  seq: number;
  type: string;
  data: Record<string, unknown>;
  at: string;
  schema_version: number;
}

export interface Signal {
  run_id: string;
  seq: number;
  name: string;
  payload: unknown;
  idempotency_key: string;
  received_at: string;
  consumed: boolean;
  consumed_at: string | null;
}

export interface SignalSent extends Signal {
  /** false: the idempotency key matched a signal kept before. */
  created: boolean;
  /** true: this signal resolved the wait the run rested at, and queued it. */
  resolved: boolean;
}

export interface Schedule {
  id: string;
  workflow: string;
  cron: string;
  timezone: string;
  inputs: Record<string, unknown>;
  overlap: 'skip' | 'allow' | 'cancel';
  catch_up: 'none' | 'latest' | 'all';
  paused: boolean;
  next_fire_at: string;
  last_run_id: string | null;
  last_fired_at: string | null;
  created_at: string;
  updated_at: string;
}

export interface WorkflowVersion {
  name: string;
  version: number;
  digest: string;
  created_at: string;
  /** Only when one version is asked for. */
  definition?: Record<string, unknown>;
}

/**
 * One message of an event stream. On a run's stream, `event` is the event's
 * type, `data` its envelope and `id` / `seq` its seq; live model text
 * (llm.delta, llm.reset, llm.end) has id and seq null.
 */
/** A tenant's budget row, in micro-units (millionths of the price unit). */
export interface Budget {
  tenant: string;
  /** null: tracked, not limited. */
  limit_micros: number | null;
  spent_micros: number;
  /** Model calls in flight. */
  reserved_micros: number;
  /** limit - spent - reserved; null without a limit. */
  left_micros: number | null;
}

/** An llm concurrency cap of the serving process, with its recent changes (oldest first). */
export interface LlmCap {
  provider: string;
  /** The cap in force. */
  cap: number;
  /** This process's calls in flight. */
  in_flight: number;
  /** reason: the limiters, as the controller logs them ("aimd 2, telemetry -, pool -, cpu 1"). */
  history: {at: string; cap: number; reason: string}[];
}

export interface StreamMessage<T = unknown> {
  event: string;
  id: string | null;
  seq: number | null;
  data: T;
}

/** The data of llm.delta, llm.reset and llm.end: a streamed model call's text (not stored, no id). */
export interface LiveFrame {
  path: string;
  attempt: number;
  /** The byte offset of `text` in the call's text. */
  offset: number;
  text: string;
}

export interface ClientOptions {
  /** A token of `runloom token create`; omit for a server run with --insecure-no-auth. */
  token?: string;
  /** Each request, connect to last byte (default 30000). */
  timeoutMs?: number;
  /** The largest JSON answer read (default 16 MiB). */
  maxBodyBytes?: number;
  /** The longest SSE line (default 4 MiB). */
  maxLineBytes?: number;
  /** The largest SSE event (default 16 MiB). */
  maxEventBytes?: number;
  /** No byte for this long and a stream counts as cut (default 45000; keep-alives come every 15 s). */
  streamIdleTimeoutMs?: number;
  /** How long a stream keeps reconnecting without getting anything before it throws (default 60000). */
  reconnectTimeoutMs?: number;
  /** A fetch to use instead of globalThis.fetch. */
  fetch?: typeof globalThis.fetch;
}

export interface CallOptions {
  signal?: AbortSignal;
}

export interface RequestOptions extends CallOptions {
  query?: Record<string, string | number | boolean | null | undefined>;
  headers?: Record<string, string>;
}

export interface RunFilter {
  status?: RunStatus;
  workflow?: string;
  /** Only the child runs of this run. */
  parent?: string;
  /** Only runs of this budget tenant. */
  tenant?: string;
  /** Only runs whose idempotency key is this, or one of whose top-level inputs has this string or integer value. */
  inputId?: string;
  /** Only runs created at or after this time (an RFC 3339 string or a Date). */
  createdAfter?: string | Date;
  /** Only runs created before this time (an RFC 3339 string or a Date). */
  createdBefore?: string | Date;
  limit?: number;
  cursor?: string;
}

export interface StartRunOptions extends CallOptions {
  /** The same key (per workflow) answers the first run; nothing is written. */
  idempotencyKey?: string;
  /** 0 or absent: the latest. */
  version?: number;
  /** 0-9. */
  priority?: number;
  budgetMicros?: number;
  /** W3C Trace Context header for the run's span. */
  traceparent?: string;
}

export interface DecideOptions extends CallOptions {
  /** decision "edit": the reviewer's version of the proposal. */
  edited?: unknown;
  /** decision "request_revision": what to change. */
  feedback?: string;
  /** decision "request_revision": the phase to rerun from. */
  fromPhase?: string;
}

export interface ScheduleOptions extends CallOptions {
  timezone?: string;
  inputs?: Record<string, unknown>;
  overlap?: 'skip' | 'allow' | 'cancel';
  catchUp?: 'none' | 'latest' | 'all';
}

export declare class RunloomError extends Error {}

/** The server answered with an error: HTTP status and its {code, message, field}. */
export declare class ApiError extends RunloomError {
  readonly status: number;
  /** The stable error code, e.g. "stale_digest", "not_found". */
  readonly code: string;
  /** The server's message. */
  readonly serverMessage: string;
  /** The request field at fault, or "". */
  readonly field: string;
  readonly method: string;
  readonly path: string;
}

/** No answer: connection refused or reset, a timeout. */
export declare class TransportError extends RunloomError {}

/** The answer is not what the API promises. */
export declare class ProtocolError extends RunloomError {}

/** A response body, SSE line or SSE event over the client's limit. */
export declare class ResponseTooLarge extends ProtocolError {}

export declare class RunloomClient {
  constructor(baseUrl: string, options?: ClientOptions);
  readonly baseUrl: string;
  timeoutMs: number;
  maxBodyBytes: number;
  maxLineBytes: number;
  maxEventBytes: number;
  streamIdleTimeoutMs: number;
  reconnectTimeoutMs: number;

  request<T = unknown>(method: string, path: string, body?: unknown, opts?: RequestOptions): Promise<T>;

  healthz(opts?: CallOptions): Promise<{status: string}>;
  readyz(opts?: CallOptions): Promise<{status: string}>;
  me(opts?: CallOptions): Promise<{name: string; role: Role}>;

  startRun(workflow: string, inputs?: Record<string, unknown>, opts?: StartRunOptions): Promise<Run>;
  getRun(runId: string, opts?: CallOptions): Promise<Run & {step_counts: StepCounts}>;
  listRuns(filter?: RunFilter, opts?: CallOptions): Promise<RunPage>;
  iterRuns(filter?: Omit<RunFilter, 'limit' | 'cursor'> & {pageSize?: number}, opts?: CallOptions): AsyncGenerator<Run>;
  steps(runId: string, opts?: CallOptions & {revision?: number}): Promise<Step[]>;
  writes(runId: string, opts?: CallOptions): Promise<Write[]>;
  events(runId: string, opts?: CallOptions & {after?: number; limit?: number}): Promise<Event[]>;
  cancel(runId: string, opts?: CallOptions): Promise<Run>;
  rerun(runId: string, fromPhase: string, opts?: CallOptions & {feedback?: string}): Promise<Run>;

  /** The gate a paused run waits on; null when none. */
  gate(runId: string, opts?: CallOptions): Promise<Gate | null>;
  /** Decides the gate whose proposal has `digest`; 409 stale_digest / not_paused records nothing. */
  decide(runId: string, digest: string, decision: Decision, opts?: DecideOptions): Promise<Run>;

  signal(runId: string, name: string, payload?: unknown,
    opts?: CallOptions & {idempotencyKey?: string}): Promise<SignalSent>;
  signals(runId: string, opts?: CallOptions): Promise<Signal[]>;

  createSchedule(id: string, workflow: string, cron: string, opts?: ScheduleOptions): Promise<Schedule>;
  getSchedule(id: string, opts?: CallOptions): Promise<Schedule>;
  listSchedules(opts?: CallOptions & {after?: string; limit?: number}): Promise<Schedule[]>;
  pauseSchedule(id: string, opts?: CallOptions): Promise<Schedule>;
  resumeSchedule(id: string, opts?: CallOptions): Promise<Schedule>;
  deleteSchedule(id: string, opts?: CallOptions): Promise<void>;

  registerWorkflow(yaml: string, opts?: CallOptions): Promise<WorkflowVersion>;
  workflows(opts?: CallOptions): Promise<WorkflowVersion[]>;
  workflow(name: string, opts?: CallOptions & {version?: number}): Promise<WorkflowVersion>;

  /** Every tenant's budget row (only opts.tenant's when given). */
  budgets(opts?: CallOptions & {tenant?: string}): Promise<Budget[]>;
  /** The serving process's llm concurrency caps, each with its newest `history` (0-64, default 64) changes. */
  llmCaps(opts?: CallOptions & {provider?: string; history?: number}): Promise<LlmCap[]>;

  /**
   * A run's events until it is finished, reconnecting with Last-Event-ID after
   * a cut: every seq exactly once, in order.
   */
  follow(runId: string, opts?: CallOptions & {after?: number; live?: false}): AsyncGenerator<StreamMessage<Event>>;
  /** With live: also the streamed model text (llm.delta, llm.reset, llm.end; id and seq null). */
  follow(runId: string, opts: CallOptions & {after?: number; live: true}): AsyncGenerator<StreamMessage<Event | LiveFrame>>;
  /** Every run's status changes; endless, reconnecting with Last-Event-ID. */
  watchRuns(opts?: CallOptions & {after?: number}): AsyncGenerator<
    StreamMessage<{run_id: string; status: RunStatus; last_event_seq: number} | {reason: string}>>;
}

export default RunloomClient;
