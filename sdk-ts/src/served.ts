/**
 * The server's operations, as the SDK uses them (`agentrein._served.ServedMode`): every request first sends
 * what the outbox holds (`outbox.ts`: `flush()`), except the write-ahead record, which carries its session's
 * confirmations. Rollbacks run in the server's workers; this side waits for them.
 */

import { createHash } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';

import type { Json, OperationType } from './connector.js';
import {
  AgentReinUnavailableError,
  ApprovalRejectedError,
  InvalidTransitionError,
  NotFoundError,
  PolicyBlockedError,
} from './errors.js';
import { Outbox, type CallConfirmed, type ExecutedCall, type OutcomeReported, type Replayer } from './outbox.js';
import { Connection, segment, type Query, type RequestOptions } from './transport.js';
import type { components } from './wire.js';

type Schemas = components['schemas'];
export type WireSession = Schemas['SessionInfo'];
export type WireAction = Schemas['Action'];
type WireActionPage = Schemas['ActionPage'];
export type WireApproval = Schemas['ApprovalInfo'];
export type WireListedApproval = Schemas['ListedApproval'];
export type WirePolicy = Schemas['Policy'];
export type WireNewPolicy = Schemas['NewPolicy'];
export type WireRollback = Schemas['Rollback'];
export type LoggedAction = Schemas['LoggedAction'];

/** The longest single long-poll asked of the server; longer waits are several in a row. */
export const LONG_POLL_MS = 30_000;
/** How long a rollback is waited for in one request before the caller's loop looks again. */
const ROLLBACK_POLL_MS = 10_000;
/** The actions read in one request when a session holds more than the server shows with it (the most it gives). */
const ACTIONS_PAGE = 1000;
/** How often a rollback that waits for a reviewer is looked at again. */
const REVIEW_POLL_MS = 500;
const ENDED = new Set(['SUCCEEDED', 'FAILED']);
/** Backoff bounds of a wait that reconnects: a random pause up to min(MAX, INITIAL * 2**n) before try n. */
const RECONNECT_INITIAL_MS = 50;
const RECONNECT_MAX_MS = 2_000;

export class Served implements Replayer {
  readonly connection: Connection;
  /** Whose records these are, for the outbox: the server and (a digest of) the key. */
  readonly identity: string;
  /** What the server is still to learn, sent by its one replayer through this object's requests. */
  readonly outbox: Outbox;

  constructor(baseUrl: string, apiKey: string, timeoutMs: number, warn: (message: string) => void, journalPath?: string) {
    this.connection = new Connection(baseUrl, apiKey, timeoutMs);
    this.identity = `${this.connection.baseUrl} key ${createHash('sha256').update(apiKey).digest('hex').slice(0, 16)}`;
    this.outbox = new Outbox(this.identity, this, { path: journalPath, warn });
  }

  /** One request, once what the outbox holds is sent: what it reads or changes comes after it. (The request
   *  of an entry the outbox sends comes here too; its `flush()` then returns at once.) */
  async call<T>(method: string, path: string, options: RequestOptions = {}): Promise<T> {
    await this.outbox.flush();
    return this.connection.call<T>(method, path, options);
  }

  // sessions -----------------------------------------------------------------------------------------
  newSession(agentId: string, intent: string, sandbox: boolean, sessionId?: string): Promise<WireSession> {
    const body = { agentId, intent, sandbox, ...(sessionId === undefined ? {} : { id: sessionId }) };
    return this.call('POST', '/sessions', { body });
  }

  /** The session with every action: the server shows a long session's first page, and the rest are read a
   *  page at a time (`GET /sessions/{id}/actions`) from its `actionsCursor`. */
  async getSession(sessionId: string): Promise<WireSession> {
    const shown = await this.call<WireSession>('GET', `/sessions/${segment(sessionId)}`);
    const actions = [...shown.actions];
    let cursor = shown.actionsCursor ?? null; // null: all shown (or a server that does not page them)
    while (cursor !== null) {
      const query: Query = { limit: ACTIONS_PAGE, cursor };
      const page = await this.call<WireActionPage>('GET', `/sessions/${segment(sessionId)}/actions`, { query });
      actions.push(...page.actions);
      cursor = page.nextCursor;
    }
    return { ...shown, actions, actionsCursor: null };
  }

  completeSession(sessionId: string): Promise<WireSession> {
    return this.call('POST', `/sessions/${segment(sessionId)}/complete`);
  }

  failSession(sessionId: string, reason: string, connector: string | null): Promise<WireSession> {
    return this.call('POST', `/sessions/${segment(sessionId)}/fail`, { body: { reason, connector } });
  }

  // actions ------------------------------------------------------------------------------------------
  /** The write-ahead record, carrying the session's earlier successes (applied first by the server). */
  async logAction(
    sessionId: string,
    record: {
      connector: string;
      apiName: string;
      operationType: OperationType;
      payload: Json;
      requiresApproval: boolean;
      approvalTimeoutMs: number;
      idempotencyKey: string;
    },
  ): Promise<LoggedAction> {
    const carried = this.outbox.take(sessionId);
    const body = {
      ...record,
      approvalTimeoutMs: Math.max(1, Math.round(record.approvalTimeoutMs)),
      ...(carried.length ? { confirm: carried.map((o) => ({ actionId: o.actionId, response: o.response, undo: o.undo })) } : {}),
    };
    let logged: LoggedAction;
    try {
      // Asked again under the call's key, the server answers the record it wrote (its answer was lost).
      logged = await this.connection.call<LoggedAction>('POST', `/sessions/${segment(sessionId)}/actions`, { body, idempotent: true });
    } catch (error) {
      if (error instanceof PolicyBlockedError || error instanceof ApprovalRejectedError || error instanceof InvalidTransitionError) {
        this.outbox.delivered(carried); // refused after the confirmations were applied
      } else {
        this.outbox.putBack(carried); // maybe not applied: sent again (a second time is harmless)
      }
      throw error;
    }
    // Those refused and not settled already (sent twice) are kept aside with the reason, as a refused entry is.
    const refused = (logged.refusedConfirmations ?? []).filter((r) => r.settled !== true);
    this.outbox.delivered(carried, new Map(refused.map((r) => [r.actionId, r.detail])));
    return logged;
  }

  /** Kept, and sent with the session's next request or within moments. */
  confirmAction(outcome: CallConfirmed): void {
    this.outbox.keep(outcome);
  }

  /** `rollsBack` false: a failure the agent only records, which does not roll the session back. */
  failAction(sessionId: string, actionId: string, error: string, rollsBack = true): Promise<WireAction> {
    return this.call('PATCH', actionPath(sessionId, actionId), { body: { status: 'FAILED', error, ...(rollsBack ? {} : { rollsBack }) } });
  }

  async sendOutcome(outcome: OutcomeReported | CallConfirmed): Promise<unknown> {
    const { sessionId, actionId } = outcome;
    if (outcome.kind === 'OutcomeReported' && !outcome.succeeded) return this.failAction(sessionId, actionId, outcome.error ?? 'failed', outcome.rollsBack ?? true);
    const body = { status: 'SUCCESS', response: outcome.response ?? null, undo: outcome.undo ?? null };
    return this.call('PATCH', actionPath(sessionId, actionId), { body });
  }

  recordExecutedAction(sessionId: string, call: ExecutedCall): Promise<WireAction> {
    return this.call('POST', `/sessions/${segment(sessionId)}/journal`, { body: call });
  }

  // approvals ----------------------------------------------------------------------------------------
  getApproval(approvalId: string, waitMs = 0): Promise<WireApproval> {
    const query: Query = waitMs > 0 ? { wait: (waitMs / 1000).toFixed(3) } : {};
    return this.call('GET', `/approvals/${segment(approvalId)}`, { query, waitMs });
  }

  /** Long-polls: the server answers the moment the approval is decided. A server that goes away (killed,
   *  restarted, stopping) is reconnected to with backoff until `timeoutMs` is up (`outlasting`); each
   *  long-poll is also how the dashboard knows the agent waits. */
  async waitForDecision(approvalId: string, timeoutMs: number): Promise<WireApproval> {
    const deadline = Date.now() + Math.max(0, timeoutMs);
    for (;;) {
      const info = await outlasting(deadline, () =>
        this.getApproval(approvalId, Math.min(LONG_POLL_MS, Math.max(0, deadline - Date.now()))),
      );
      if (info.status !== 'PENDING' || Date.now() >= deadline) return info;
    }
  }

  /** Where a person decides the request: the dashboard of this server. */
  howToDecide(approvalId: string): string {
    return `decide it at ${this.connection.baseUrl}/dashboard/approvals#approval-${approvalId}`;
  }

  withdrawApproval(approvalId: string, reason: string): Promise<unknown> {
    return this.call('POST', `/approvals/${segment(approvalId)}/withdraw`, { body: { reason } });
  }

  async listApprovals(query: Query): Promise<WireListedApproval[]> {
    await this.outbox.flush();
    return this.connection.listed<WireListedApproval>('/approvals', query);
  }

  decide(approvalId: string, verb: 'approve' | 'reject', reviewer: string | null, reason: string | null): Promise<WireApproval> {
    return this.call('POST', `/approvals/${segment(approvalId)}/${verb}`, { body: { reviewer, reason } });
  }

  // policies -----------------------------------------------------------------------------------------
  addPolicy(policy: WireNewPolicy): Promise<WirePolicy> {
    return this.call('POST', '/policies', { body: policy });
  }

  // rollback -----------------------------------------------------------------------------------------
  requestRollback(sessionId: string, trigger: string, approvalTimeoutMs: number): Promise<WireRollback> {
    const body = { reason: trigger, approvalTimeoutMs: Math.max(1, Math.round(approvalTimeoutMs)) };
    return this.call('POST', `/sessions/${segment(sessionId)}/rollback`, { body });
  }

  /** The session's rollback under way, or `null` (never rolled back, or ended). */
  async activeRollback(sessionId: string, waitMs = 0): Promise<WireRollback | null> {
    let job: WireRollback;
    try {
      const query: Query = waitMs > 0 ? { wait: waitMs / 1000 } : {};
      job = await this.call('GET', `/sessions/${segment(sessionId)}/rollback`, { query, waitMs });
    } catch (error) {
      if (error instanceof NotFoundError && error.kind !== 'session') return null;
      throw error;
    }
    return ENDED.has(job.status) ? null : job;
  }

  /** Wait for the server's workers to end the session's rollback (or for it to wait for a reviewer), at
   *  most `waitMs`; the session as it then stands. */
  async followRollback(sessionId: string, waitMs: number, { stopAtReview = false } = {}): Promise<WireSession> {
    const deadline = Date.now() + waitMs;
    // Reads only, so the whole look is repeated when the server went away meanwhile.
    await outlasting(deadline, async () => {
      let job = await this.activeRollback(sessionId);
      while (job !== null && Date.now() < deadline) {
        if (job.status === 'WAITING_APPROVAL') {
          if (stopAtReview) break;
          await sleep(Math.min(REVIEW_POLL_MS, deadline - Date.now())); // the server answers at once meanwhile
        }
        job = await this.activeRollback(sessionId, Math.min(ROLLBACK_POLL_MS, Math.max(1, deadline - Date.now())));
      }
    });
    return outlasting(deadline, () => this.getSession(sessionId));
  }
}

/** `look()` once the server answers it: a wait outlives a server that went away (killed, restarted) by
 *  trying again with backoff until `deadline` (epoch ms), and only then throws `AgentReinUnavailableError`.
 *  `look` must be a read, or safe to repeat. */
export async function outlasting<T>(deadline: number, look: () => Promise<T>): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await look();
    } catch (error) {
      const pause = Math.random() * Math.min(RECONNECT_MAX_MS, RECONNECT_INITIAL_MS * 2 ** attempt);
      if (!(error instanceof AgentReinUnavailableError) || Date.now() + pause >= deadline) throw error;
      await sleep(pause);
    }
  }
}

function actionPath(sessionId: string, actionId: string): string {
  return `/sessions/${segment(sessionId)}/actions/${segment(actionId)}`;
}
