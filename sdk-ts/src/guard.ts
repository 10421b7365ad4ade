/**
 * The guarded call (`agentrein._guard`): what happens, in order, when a wrapped client makes a
 * side-effecting call.
 *
 * 1. The connector describes the call (`prepare`); reads pass straight through.
 * 2. Write-ahead: the action is recorded before anything runs; policies may block it or hold it for
 *    approval. A record the server refuses as invalid or fails to write (or, `failureMode: 'closed'`,
 *    cannot be sent) is action logging that failed: the call does not run, the session is rolled back.
 * 3. A held call waits for the reviewer's decision with the server's long-poll (rejected or expired: the
 *    session is rolled back, and `ApprovalRejectedError` / `ApprovalTimeoutError` is thrown).
 * 4. The call runs with the action's idempotency key, retried on transient failures when it is `retryable`.
 * 5. Success is confirmed with the redacted response and the undo the connector derives (with the
 *    session's next request: `outbox.ts`); failure is recorded, the session rolled back, and the
 *    ORIGINAL error rethrown.
 */

import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';

import type { Json, PreparedCall } from './connector.js';
import {
  AgentReinError,
  AgentReinUnavailableError,
  ApprovalRejectedError,
  ApprovalTimeoutError,
  RollbackFailedError,
  ValidationError,
} from './errors.js';
import { bounded, checkNesting } from './nesting.js';
import type { Options } from './options.js';
import type { Outbox } from './outbox.js';
import type { Redactor } from './redaction.js';
import type { LoggedAction, Served, WireAction, WireApproval } from './served.js';
import { NO_UNDO, UNDO_NONE, undoToWire, type WireUndo } from './undo.js';

/** The property a failed call's error gets when the rollback it caused failed too. */
export const ROLLBACK_FAILURE = 'agentreinRollbackFailure';
/** Attempts of a `retryable` call, and the backoff bounds (`agentrein_core.retry`): a random wait up to
 *  `min(MAX, INITIAL * 2**n)` before retry n. */
export const RETRY_ATTEMPTS = 4;
const INITIAL_WAIT_MS = 50;
const MAX_WAIT_MS = 2000;
/** How long an approval past its time is waited for: the server's maintenance expires it within this. */
const EXPIRY_GRACE_MS = 1000;
/** The longest reason sent when action logging failed. */
const MAX_REASON = 1000;

export interface Guard {
  readonly served: Served;
  readonly journal: Outbox;
  readonly sessionId: string;
  readonly options: Options;
  /** The wrapped client as its connector sees it (`Connector.bind`; else the client itself). */
  readonly bound: unknown;
  readonly redactor: Redactor;
  readonly log: (message: string) => void;
}

/** `client.<path>(...args)`, prepared by the connector, through the guard's steps; resolves to its result. */
export async function guardedCall(guard: Guard, call: PreparedCall, path: readonly string[]): Promise<unknown> {
  // Made before the write-ahead record is asked for: if that record is written but the answer lost, the call
  // runs as with AgentRein unreachable, journaled under this key, and its replay settles that record.
  const key = `agentrein-${randomBytes(16).toString('hex')}`;
  const logged = await writeAhead(guard, call, path, key);
  const retryable = guard.options.isRetryable(call, path);
  if (logged === null) {
    let result: unknown;
    try {
      result = await execute(guard, call, key, retryable);
    } catch (error) {
      journalCall(guard, call, key, { error, rollsBack: failureRollsBack(guard, call, error) });
      throw error;
    }
    const failure = guard.options.connector.failureIn?.(call, result) ?? null;
    journalCall(guard, call, key, failure === null ? { result } : { error: failure, rollsBack: false });
    return result;
  }
  if (logged.approval !== null) await awaitApproval(guard, logged);
  let result: unknown;
  try {
    result = await execute(guard, call, logged.action.idempotencyKey, retryable);
  } catch (error) {
    await recordFailure(guard, logged.action, error, failureRollsBack(guard, call, error));
    throw error;
  }
  const failure = guard.options.connector.failureIn?.(call, result) ?? null;
  if (failure !== null) await recordFailure(guard, logged.action, failure, false);
  else recordSuccess(guard, call, logged.action, result);
  return result;
}

async function execute(guard: Guard, call: PreparedCall, key: string, retryable: boolean): Promise<unknown> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await call.run(key);
    } catch (error) {
      if (!retryable || attempt >= RETRY_ATTEMPTS || !guard.options.connector.isTransient(error)) throw error;
      await sleep(Math.random() * Math.min(MAX_WAIT_MS, INITIAL_WAIT_MS * 2 ** attempt)); // full jitter
    }
  }
}

/** Record the call before it runs; `null` when AgentRein is out of reach and `failureMode` is 'open'. */
async function writeAhead(
  guard: Guard,
  call: PreparedCall,
  path: readonly string[],
  key: string,
): Promise<LoggedAction | null> {
  try {
    checkNesting('payload', call.payload); // before the redactor, which recurses: the call has not run yet
    await guard.journal.replay(); // what is journaled reaches AgentRein before this record
    return await guard.served.logAction(
      guard.sessionId,
      {
        connector: guard.options.connector.name,
        apiName: call.apiName,
        operationType: call.operationType,
        payload: guard.redactor.redact(call.payload),
        requiresApproval: guard.options.needsApproval(call.apiName, path),
        approvalTimeoutMs: guard.options.timeoutMs,
        idempotencyKey: key,
      },
    );
  } catch (error) {
    if (error instanceof AgentReinUnavailableError) {
      if (guard.options.failureMode === 'open') {
        guard.journal.warnUnavailable(error);
        return null;
      }
      await loggingFailed(guard, error, error, call.apiName);
    } else if (error instanceof ApprovalRejectedError) {
      await seeRollbackThrough(guard, error); // the plan has no approval gates: the session is being rolled back
    } else if (isLoggingFailure(error)) {
      await loggingFailed(guard, error, error, call.apiName);
    }
    throw error;
  }
}

async function awaitApproval(guard: Guard, logged: LoggedAction): Promise<void> {
  const approval = logged.approval!;
  const approvalId = approval.approvalId;
  const leftMs = Date.parse(approval.timeoutAt) - Date.parse(approval.requestedAt);
  // A held call is otherwise silent for as long as the request lasts: say what it waits for, once.
  guard.log(
    `AgentRein holds ${logged.action.apiName} for approval ${approvalId} (${Math.round(leftMs / 1000)} s left to ` +
      `decide it): ${guard.served.howToDecide(approvalId)}`,
  );
  const decision = await decisionOf(guard, approvalId, leftMs);
  const status = decision?.status ?? 'EXPIRED';
  const runs = status === 'APPROVED' ? 'runs now' : 'does not run';
  guard.log(`AgentRein approval ${approvalId} is ${status}: the held ${logged.action.apiName} ${runs}`);
  if (status === 'APPROVED') return;
  const refusal =
    decision === null || status === 'EXPIRED'
      ? new ApprovalTimeoutError(
          decision === null
            ? `approval ${approvalId} was not decided in time: AgentRein could not be reached until the request's time was up`
            : `approval ${approvalId} expired before anyone decided it`,
          approvalId,
          logged.action.actionId,
        )
      : new ApprovalRejectedError(
          decision.reason ? `approval rejected: ${decision.reason}` : 'approval rejected',
          decision.reason,
          decision.resolvedBy,
          approvalId,
          logged.action.actionId,
        );
  // Out of reach until its time was up: AgentRein expires the request, and rolls the session back, once back.
  if (decision !== null) await seeRollbackThrough(guard, refusal);
  throw refusal;
}

/** The request once decided; `null` when AgentRein stayed out of reach until its time (`leftMs`) was up: a
 *  wait rides out outages (a server restarted) until then, whatever `failureMode` says, for the decision may
 *  be made meanwhile. */
async function decisionOf(guard: Guard, approvalId: string, leftMs: number): Promise<WireApproval | null> {
  const ends = Date.now() + leftMs + EXPIRY_GRACE_MS;
  for (;;) {
    let decision: WireApproval;
    try {
      decision = await guard.served.waitForDecision(approvalId, Math.max(guard.options.pollIntervalMs, ends - Date.now()));
    } catch (error) {
      if (!(error instanceof AgentReinUnavailableError)) throw error;
      return null; // out of reach for all of the wait (waitForDecision reconnects until then)
    }
    if (decision.status !== 'PENDING') return decision;
  }
}

function recordSuccess(guard: Guard, call: PreparedCall, action: WireAction, result: unknown): void {
  try {
    const { response, undo } = outcome(guard, call, result);
    guard.served.confirmAction({ kind: 'CallConfirmed', sessionId: guard.sessionId, actionId: action.actionId, response, undo });
  } catch (error) {
    // The agent's call succeeded; our bookkeeping failing must not say otherwise (it stays CLEARED).
    guard.log(`AgentRein could not confirm action ${action.actionId}; it stays CLEARED: ${describe(error, guard.redactor)}`);
  }
}

/** `error`: what the call threw (the session rolls back); or, `rollsBack` false, why a result it returned is a
 *  failure the agent chose to only record (`Connector.failureIn`). */
async function recordFailure(guard: Guard, action: WireAction, error: unknown, rollsBack = true): Promise<void> {
  const message = describe(error, guard.redactor);
  try {
    await guard.served.failAction(guard.sessionId, action.actionId, message, rollsBack);
  } catch (failure) {
    if (failure instanceof AgentReinUnavailableError) {
      guard.journal.warnUnavailable(failure);
      const outcome = { actionId: action.actionId, succeeded: false, error: message, ...(rollsBack ? {} : { rollsBack }) };
      guard.journal.append({ kind: 'OutcomeReported', sessionId: guard.sessionId, ...outcome });
      return;
    }
    guard.log(`AgentRein could not record the failure of action ${action.actionId}: ${describe(failure, guard.redactor)}`);
    if (rollsBack && isLoggingFailure(failure)) await loggingFailed(guard, error, failure, action.apiName);
    return;
  }
  if (rollsBack) await seeRollbackThrough(guard, error);
}

/** Recording `apiName` failed with `cause`: roll the session back, as a failed call does, before the call
 *  throws `raising`. AgentRein out of reach: the rollback is journaled, asked for once AgentRein answers. */
async function loggingFailed(guard: Guard, raising: unknown, cause: unknown, apiName: string): Promise<void> {
  const reason = `action logging failed: ${describe(cause, guard.redactor)} (${guard.redactor.redactText(apiName)})`;
  const shortened = reason.length > MAX_REASON ? `${reason.slice(0, MAX_REASON - 1)}…` : reason;
  const connector = guard.options.connector.name;
  try {
    await guard.served.failSession(guard.sessionId, shortened, connector);
  } catch (error) {
    if (error instanceof AgentReinUnavailableError) {
      guard.journal.append({ kind: 'LoggingFailed', sessionId: guard.sessionId, reason: shortened, connector });
    } else {
      guard.log(`AgentRein could not roll back session ${guard.sessionId} after action logging failed: ${describe(error, guard.redactor)}`);
    }
    return;
  }
  await seeRollbackThrough(guard, raising);
}

/** See the session's rollback through before the call throws `raising`; a rollback that failed is attached
 *  to it (`err.agentreinRollbackFailure`). AgentRein's own problems here are logged: the agent must see its
 *  own error. */
async function seeRollbackThrough(guard: Guard, raising: unknown): Promise<void> {
  let session;
  try {
    session = await guard.served.followRollback(guard.sessionId, guard.options.timeoutMs, { stopAtReview: true });
  } catch (error) {
    if (error instanceof AgentReinUnavailableError) guard.journal.warnUnavailable(error);
    else guard.log(`AgentRein could not finish rolling back session ${guard.sessionId}: ${describe(error, guard.redactor)}`);
    return;
  }
  const failure = RollbackFailedError.of(session);
  if (failure !== null && typeof raising === 'object' && raising !== null) {
    Object.defineProperty(raising, ROLLBACK_FAILURE, { value: failure, configurable: true });
  }
}

/** What is recorded of a successful call: its redacted result and how to undo it. */
function outcome(guard: Guard, call: PreparedCall, result: unknown): { response: Json; undo: WireUndo } {
  const connector = guard.options.connector;
  const override = guard.options.undoOverride(call.apiName);
  let undo = connector.undoFor(call, result, override as { readonly [key: string]: Json } | undefined);
  try {
    if (undo.type !== UNDO_NONE && !connector.undoTypes.includes(undo.type)) {
      throw new ValidationError('undo.type', `${JSON.stringify(undo.type)} is not an undo type of '${connector.name}'`);
    }
    connector.checkUndo?.(undo);
    checkNesting('undo', undo.params);
  } catch (error) {
    if (!(error instanceof ValidationError)) throw error;
    // The call ran: recorded with no undo (the session shows it as not undone), never left unconfirmed.
    guard.log(`AgentRein cannot undo ${call.apiName} (${error.message}); it is recorded as an action with no undo`);
    undo = NO_UNDO;
  }
  // The undo is redacted too: it may wait on disk (the outbox).
  const response = guard.redactor.redact(bounded(connector.recordResult(call, result)));
  return { response, undo: undoToWire(guard.redactor.redactUndo(undo)) };
}

/** Whether `call`, which threw `error`, rolls the session back (`Connector.rollsBack`). */
function failureRollsBack(guard: Guard, call: PreparedCall, error: unknown): boolean {
  return guard.options.connector.rollsBack?.(call, error) ?? true;
}

function journalCall(
  guard: Guard,
  call: PreparedCall,
  key: string,
  ended: { result?: unknown; error?: unknown; rollsBack?: boolean },
): void {
  try {
    const failed = 'error' in ended;
    const recorded = failed ? null : outcome(guard, call, ended.result);
    guard.journal.append({
      kind: 'CallRecorded',
      sessionId: guard.sessionId,
      call: {
        idempotencyKey: key,
        connector: guard.options.connector.name,
        apiName: guard.redactor.redactText(call.apiName),
        operationType: call.operationType,
        status: failed ? 'FAILED' : 'SUCCESS',
        payload: guard.redactor.redact(call.payload),
        response: recorded?.response ?? null,
        undo: recorded?.undo ?? null,
        error: failed ? describe(ended.error, guard.redactor) : null,
        ...(ended.rollsBack === false ? { rollsBack: false } : {}),
      },
    });
  } catch (error) {
    guard.log(`AgentRein could not journal the call ${call.apiName}: ${String(error)}`);
  }
}

/** Whether `error`, thrown by recording a call, means action logging failed (`guard.is_logging_failure`):
 *  AgentRein's own errors say so themselves (`rollsBack`, from the server's answer); any other error (a
 *  broken connection) is AgentRein failing. */
export function isLoggingFailure(error: unknown): boolean {
  if (error instanceof AgentReinError) return error.rollsBack;
  return true;
}

/** What is recorded of an error: redacted like a payload, for it may echo a URL's token or a card. */
function describe(error: unknown, redactor: Redactor): string {
  const text = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
  return redactor.redactText(text);
}
