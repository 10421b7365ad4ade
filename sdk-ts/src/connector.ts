/**
 * What a connector is, in TypeScript: the object that knows one service's SDK (the twin of the Python
 * `agentrein_core.connector.Connector`). The wrapped call, its record, policies, approvals, retries and
 * failure modes are the same for every service (`wrap.ts`); a connector answers the service's questions:
 *
 * 1. What is this call? `prepare` names a method called on the wrapped client (canonical `apiName`, the
 *    same the Python connector gives it, operation type, redacted-later payload), or `null` to let it
 *    through unrecorded (reads, helpers, `octokit.paginate`).
 * 2. How is it made safe to retry? `PreparedCall.run(key)` puts the action's idempotency key where the
 *    service expects it; `isTransient` says which failures are worth retrying.
 * 3. How is it undone? `undoFor` derives the same undo config the Python connector derives: the server
 *    runs it, with the organisation's stored credentials, so a session recorded from TypeScript rolls back
 *    exactly like one recorded from Python (`contract/connectors.json` pins both). `undoTypes` names the
 *    types its server side runs; `checkUndoOverride` and `checkUndo` (both optional) refuse, at `wrap()` and
 *    after the call, an undo it could not run (the call is then recorded with no undo).
 * 4. What must never be stored? `sensitiveFields` extends the default redaction list.
 *
 * A connector whose calls need more than the client (an MCP client: the server's name, its undo table, what a
 * tool error means) takes `wrap()` options of its own (`wrapOptions`) and `bind`s the client to them once per
 * `wrap()`: `prepare`, `runUndo`, `isClosed` and `reopen` then receive that binding as their `client`. A call
 * that cannot be described without asking the service (an MCP tool's annotations, from its listing) is
 * prepared asynchronously: `prepare` may answer a promise, awaited before anything is recorded. A glob of
 * `requiresApproval`/`retryable` matches the api name (or the path as called) unless the connector says
 * otherwise (`globMatches`: an MCP glob may name the tool alone). `retrySafe: false` on a call forbids its
 * retries whatever `retryable` says (a tool that may not run twice).
 *
 * Undos run in the server, except those a connector runs itself (`runUndo`): the server cannot reach what the
 * agent's process holds (an MCP server over the agent's stdio, unless the organisation's `mcp` connector
 * settings name that server), so it hands such an undo to the process that wrapped the client (`undos.ts`), which runs it through that binding while it is open (`isClosed`), else
 * through one `reopen` makes (the same command, arguments and environment).
 *
 * A plugin's connector is registered on the client that uses it (`agentrein.registerConnector(connector)`, or
 * `new AgentRein({ connectors: [connector] })`) and named in `wrap()` by its `name`.
 */

/** A JSON value, as the server stores it. */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/** The operation types of DESIGN §4. */
export type OperationType = 'CREATE' | 'UPDATE' | 'DELETE' | 'OTHER';

/** An undo, as the server stores and runs it: `{ type: 'stripe-delete', params: {...} }`. */
export interface UndoConfig {
  readonly type: string;
  readonly params: { readonly [key: string]: Json };
  readonly requireApproval?: boolean;
}

/** One intercepted call, described and ready to run. */
export interface PreparedCall {
  readonly apiName: string;
  readonly operationType: OperationType;
  readonly payload: { readonly [key: string]: Json };
  /** Makes the real call (every retry calls it again with the same key) and resolves to its result. */
  readonly run: (idempotencyKey: string) => Promise<unknown>;
  /** The connector's own note for `undoFor`; AgentRein never reads it. */
  readonly context?: unknown;
  /** Whether running the call again cannot do it twice: only then is it retried, whatever `retryable` says
   *  (default true: the service honours the idempotency key). */
  readonly retrySafe?: boolean;
}

export interface Connector {
  /** The name agents pass as `wrap(client, session, { connector: NAME })`. */
  readonly name: string;
  /** Key fragments whose values are redacted, on top of the default list. */
  readonly sensitiveFields: readonly string[];
  /** The undo types the server runs for this connector (`none` is always understood): an `undo` option of
   *  `wrap()` naming another is refused at once, as the server would refuse it once the call ran. */
  readonly undoTypes: readonly string[];
  /** Whether this connector can wrap `client` (a `Stripe`, an `Octokit`, `fetch`). */
  accepts(client: unknown): boolean;
  /** Whether a value reached from the wrapped client (a property or a method's result) is wrapped too, so
   *  that calls at any depth are seen (`stripe.subscriptions`, `octokit.rest.issues`). */
  descend(value: unknown): boolean;
  /** `client.<path>(...args)` described, or `null` to let it through unrecorded; a promise of either when
   *  the service must be asked first (`client` is the binding, when the connector `bind`s). */
  prepare(client: unknown, path: readonly string[], args: readonly unknown[]): PreparedCall | null | Promise<PreparedCall | null>;
  /** What is kept of the call's result in the record (the server redacts it again). */
  recordResult(call: PreparedCall, result: unknown): Json;
  /** Why `result`, which the call returned rather than threw, is a failed call the agent reads as a result (an
   *  MCP tool's `isError` answer, when the agent chose to only record those): it is recorded `FAILED` and rolls
   *  nothing back. `null` (or no such method): the call succeeded. */
  failureIn?(call: PreparedCall, result: unknown): string | null;
  /** Whether `call`, which threw `error`, rolls the session back. `false`: it is recorded `FAILED`, nothing is
   *  rolled back, and the agent still gets `error` (an MCP server's JSON-RPC error, when the agent chose to
   *  only record tool errors). `true` (or no such method): a failed call rolls the session back. */
  rollsBack?(call: PreparedCall, error: unknown): boolean;
  /** The undo the call's result calls for, merged with the agent's `override` (`undo` option of `wrap`). */
  undoFor(call: PreparedCall, result: unknown, override?: { readonly [key: string]: Json }): UndoConfig;
  /** Whether `error` (thrown by `run`) is worth retrying with the same key. */
  isTransient(error: unknown): boolean;
  /** Refuse, at `wrap()` time, an `undo` option this connector could not run beyond its type (checked
   *  already against `undoTypes`): throw a `ValidationError` naming the field (`undo['POST /v1/*'].method`). */
  checkUndoOverride?(glob: string, override: { readonly [key: string]: Json }): void;
  /** Refuse an undo this connector derived (or merged with the agent's override) that it could not run:
   *  throw a `ValidationError`. The call then is recorded with no undo, as the Python SDK does, rather than
   *  left unconfirmed (the server checks every undo again before it stores it). */
  checkUndo?(undo: UndoConfig): void;
  /** The `wrap()` options this connector takes for itself (`server`, say), handed to `bind`; another name
   *  is refused. When it names `undo`, `wrap()`'s `undo` is the connector's own (an undo table), not
   *  overrides by api name. */
  readonly wrapOptions?: readonly string[];
  /** The wrapped `client` as `prepare`, `runUndo`, `isClosed` and `reopen` receive it, given the `wrap()`
   *  options named in `wrapOptions` (those the agent passed); throw a `ValidationError` for a value it cannot
   *  use. Without it, the client itself. */
  bind?(client: unknown, options: { readonly [option: string]: unknown }): unknown;
  /** Whether a glob of `requiresApproval` or `retryable` names `apiName` (by default: a glob over the whole
   *  api name, or over the path as called). */
  globMatches?(glob: string, apiName: string): boolean;
  /** Run an undo the server hands to this process (one it cannot run itself) through `client` (a binding);
   *  resolve once the effect is gone, reject (an `UndoError`-like error saying why) otherwise. */
  runUndo?(undo: UndoConfig, client: unknown, idempotencyKey: string): Promise<void>;
  /** Whether `client` (a binding) can no longer send (the agent closed it). Without it, never. */
  isClosed?(client: unknown): boolean;
  /** Whether `client` (as `bind` made it) reaches the service `undo` is for, for a connector whose clients reach
   *  different services (each MCP server is one): an undo runs through a client of its own service only. */
  serves?(client: unknown, undo: UndoConfig): boolean;
  /** A binding that reaches the service as the closed `client` did, to run an undo through; throw an error
   *  that says why when it cannot. Without it, `client` itself. */
  reopen?(client: unknown): unknown;
}

const VERBS: ReadonlyMap<string, OperationType | 'READ'> = new Map([
  ...['create', 'add', 'post', 'insert', 'new'].map((v) => [v, 'CREATE'] as const),
  ...['update', 'edit', 'put', 'patch', 'modify', 'set', 'write', 'move', 'rename'].map((v) => [v, 'UPDATE'] as const),
  ...['delete', 'del', 'remove', 'cancel', 'close', 'drop'].map((v) => [v, 'DELETE'] as const),
  ...['get', 'list', 'retrieve', 'search', 'read', 'find', 'open', 'query', 'fetch'].map((v) => [v, 'READ'] as const),
]);

/** What a method or tool named `name` does, by its first word (`create_entities`, `deleteFile`, `list-issues`):
 *  the generic classification of DESIGN §4 (`agentrein_core.connector.operation_by_verb`, the same words). */
export function operationByVerb(name: string): OperationType | 'READ' {
  const first = /[A-Za-z][a-z]*|[a-z]+/.exec(name);
  return (first && VERBS.get(first[0].toLowerCase())) || 'OTHER';
}
