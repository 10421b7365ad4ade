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
 * A plugin's connector is registered with `registerConnector(connector)` and named in `wrap()` by its `name`.
 */

/** A JSON value, as the server stores it. */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/** The operation types of DESIGN §4. */
export type OperationType = 'CREATE' | 'UPDATE' | 'DELETE' | 'OTHER';

/** An undo, as the server stores and runs it: `{ type: 'stripe-delete', params: {...} }`. */
/** An undo as the server stores it: `{ type, requireApproval, ...params }`. */
export type WireUndo = { readonly type: string; readonly requireApproval: boolean; readonly [param: string]: Json };

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
  /** `client.<path>(...args)` described, or `null` to let it through unrecorded. */
  prepare(client: unknown, path: readonly string[], args: readonly unknown[]): PreparedCall | null;
  /** What is kept of the call's result in the record (the server redacts it again). */
  recordResult(call: PreparedCall, result: unknown): Json;
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
}
