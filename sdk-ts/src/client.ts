/**
 * `AgentRein`: what an agent talks to (server mode; the embedded engine is Python's). Sessions, the
 * wrapped clients, approvals and policies, through an AgentRein server:
 *
 *     const agentrein = new AgentRein({ baseUrl: 'http://127.0.0.1:8000', apiKey: 'ar_…' });
 *     const session = await agentrein.newSession({ agentId: 'billing-agent', intent: 'Monthly invoices' });
 *     const stripe = agentrein.wrap(new Stripe(key), session, { connector: 'stripe' });
 */

import { randomBytes } from 'node:crypto';

import { AgentReinError, AgentReinUnavailableError, RollbackFailedError, ValidationError } from './errors.js';
import type { Connector } from './connector.js';
import { defaultConnectors } from './connectors/index.js';
import { Options, DEFAULT_TIMEOUT_MS, type FailureMode, type WrapOptions } from './options.js';
import type { Outbox } from './outbox.js';
import { Redactor } from './redaction.js';
import { ConnectorRegistry } from './registry.js';
import { Served, type WireListedApproval, type WireApproval, type WirePolicy, type WireSession } from './served.js';
import type { ApprovalStatus, PolicyEffect, PolicyOperationType } from './statuses.js';
import { UndoTaker } from './undos.js';
import { wrapClient } from './wrap.js';

export const URL_ENV = 'AGENTREIN_URL';
/** The fields an approvals list leaves out unless asked for: every one is (as the Python SDK asks). */
const INCLUDED_FIELDS = ['purpose', 'sessionIntent', 'connector', 'description', 'targetHost', 'payload', 'consequences', 'outcome'];
export const API_KEY_ENV = 'AGENTREIN_API_KEY';

/** A session as the server holds it: `{ id, status, displayStatus, agentId, intent, sandbox, actions:
 *  [{ actionId, seq, apiName, operationType, status, undoStatus, … }], … }`. */
export type Session = WireSession;
export type SessionAction = WireSession['actions'][number];
/** A session, or its id. */
export type SessionRef = Session | string;
export type Approval = WireApproval;
export type ListedApproval = WireListedApproval;
export type Policy = WirePolicy;

export interface AgentReinOptions {
  /** The server's address (default `$AGENTREIN_URL`). */
  readonly baseUrl?: string;
  /** An API key of the organisation (default `$AGENTREIN_API_KEY`). */
  readonly apiKey?: string;
  /** The journal of `failureMode: 'open'` (default `$AGENTREIN_JOURNAL`, else a file per server and key in the
   *  user's state directory: `~/.local/state/agentrein/journal-<digest>.jsonl` on Linux). */
  readonly journalPath?: string;
  /** How long one request to the server may take, long-polls aside (default 10000 ms). */
  readonly requestTimeoutMs?: number;
  /** Connectors this client finds by name besides the built-in ones (as `registerConnector` each). */
  readonly connectors?: readonly Connector[];
}

export interface NewSession {
  readonly agentId: string;
  readonly intent?: string;
  readonly sandbox?: boolean;
  /** When the server cannot be reached: `'open'` (default) opens the session here, journaled and replayed
   *  with its calls; `'closed'` throws `AgentReinUnavailableError`. */
  readonly failureMode?: FailureMode;
}

export interface NewPolicy {
  readonly name: string;
  readonly effect: PolicyEffect;
  readonly connector?: string;
  readonly apiName?: string;
  readonly agentId?: string;
  readonly operationType?: PolicyOperationType;
  /** A `REQUIRE_APPROVAL` policy that holds matching calls before they run (else reviews them after). */
  readonly beforeExecution?: boolean;
  readonly approvalTimeoutMs?: number;
  readonly enabled?: boolean;
}

export interface Decision {
  readonly reviewer?: string;
  readonly reason?: string;
}

export class AgentRein {
  private readonly served: Served;
  private readonly journal: Outbox;
  /** This client's own: its registrations are not seen by another client. */
  private readonly connectors = new ConnectorRegistry(defaultConnectors);
  private readonly live = new WeakRef(this);
  /** Runs the undos the server hands back to this process (those of a connector with `runUndo`). */
  private readonly undos: UndoTaker;

  constructor(options: AgentReinOptions = {}) {
    const baseUrl = options.baseUrl ?? process.env[URL_ENV];
    const apiKey = options.apiKey ?? process.env[API_KEY_ENV];
    if (!baseUrl || !/^https?:\/\//.test(baseUrl)) {
      throw new ValidationError('baseUrl', `needs the server's http(s) address (baseUrl or $${URL_ENV})`);
    }
    if (!apiKey) throw new ValidationError('apiKey', `server mode needs an API key (apiKey or $${API_KEY_ENV})`);
    const timeoutMs = options.requestTimeoutMs ?? 10_000;
    if (!Number.isInteger(timeoutMs) || timeoutMs <= 0 || timeoutMs > MAX_TIMER_MS) {
      throw new ValidationError('requestTimeoutMs', `must be a whole number of milliseconds from 1 to ${MAX_TIMER_MS}, not ${String(timeoutMs)}`);
    }
    if (options.connectors !== undefined && !Array.isArray(options.connectors)) {
      throw new ValidationError('connectors', 'must be a list of connectors');
    }
    for (const connector of options.connectors ?? []) this.registerConnector(connector);
    this.served = new Served(baseUrl, apiKey, timeoutMs, warn, options.journalPath);
    this.journal = this.served.outbox;
    this.undos = new UndoTaker(this.served, new Redactor(), warn);
    LIVE.add(this.live);
    FORGET.register(this, this.live);
  }

  /** Make `connector` available to this client's `wrap()` by its name; a connector of the same name (a
   *  built-in one too) is replaced for this client alone. */
  registerConnector(connector: Connector): void {
    this.connectors.register(connector);
  }

  /** Wrap `client` (a `Stripe`, an `Octokit`, `fetch`...): the same object and type, every side-effecting
   *  call recorded, checked, held for approval where asked, and undoable. */
  wrap<T>(client: T, session: SessionRef, options: WrapOptions): T {
    const checked = Options.build(options, this.connectors);
    if (!checked.connector.accepts(client)) {
      throw new ValidationError('connector', `the '${checked.connector.name}' connector cannot wrap this client`);
    }
    const bound = checked.connector.bind ? checked.connector.bind(client, checked.own) : client;
    const id = sessionId(session);
    this.undos.wrapped(id, checked.connector, bound);
    return wrapClient(client, {
      served: this.served,
      journal: this.journal,
      sessionId: id,
      options: checked,
      bound,
      redactor: new Redactor(checked.connector.sensitiveFields),
      log: warn,
    });
  }

  // sessions -----------------------------------------------------------------------------------------
  async newSession(options: NewSession): Promise<Session> {
    if (typeof options !== 'object' || options === null || typeof options.agentId !== 'string' || !options.agentId) {
      throw new ValidationError('agentId', 'a session needs the agentId of the agent that runs it');
    }
    const { agentId, intent = '', sandbox = false, failureMode = 'open' } = options;
    try {
      return await this.served.newSession(agentId, intent, sandbox); // what the outbox holds is sent first
    } catch (error) {
      if (!(error instanceof AgentReinUnavailableError) || failureMode === 'closed') throw error;
      this.journal.warnUnavailable(error);
      const id = `ses_${randomBytes(16).toString('hex')}`;
      const openedAt = new Date().toISOString();
      // Redacted as AgentRein would store them: the journal is on disk.
      const redactor = new Redactor();
      const [agent, declared] = [redactor.redactText(agentId), redactor.redactText(intent)];
      this.journal.append({ kind: 'SessionStarted', sessionId: id, agentId: agent, intent: declared, sandbox, openedAt });
      return offlineSession(id, agent, declared, sandbox, openedAt);
    }
  }

  async getSession(session: SessionRef): Promise<Session> {
    return this.served.getSession(sessionId(session));
  }

  /** The agent is done. A session opened while AgentRein was unreachable, of which AgentRein has not
   *  learnt yet, is completed in the journal (after its calls) when AgentRein still cannot be reached. */
  async completeSession(session: SessionRef): Promise<Session> {
    const id = sessionId(session);
    try {
      const completed = await this.served.completeSession(id);
      this.undos.forget(id);
      return completed;
    } catch (error) {
      const opened = this.journal.entries().find((e) => e.sessionId === id && e.kind === 'SessionStarted');
      if (!(error instanceof AgentReinUnavailableError) || opened?.kind !== 'SessionStarted') throw error;
      this.journal.warnUnavailable(error);
      const completedAt = new Date().toISOString();
      this.journal.append({ kind: 'SessionCompleted', sessionId: id, completedAt });
      const { agentId, intent, sandbox, openedAt } = opened;
      return { ...offlineSession(id, agentId, intent, sandbox, openedAt), status: 'COMPLETED', displayStatus: 'COMPLETED', completedAt };
    }
  }

  /** Undo the session's executed actions, last first, and return the session as it then stands; waits
   *  for the server's workers (and a rollback approval) at most `timeoutMs`. An undo that fails stops the
   *  chain and throws `RollbackFailedError` (with the session and the action). */
  async rollbackSession(session: SessionRef, options: { timeoutMs?: number } = {}): Promise<Session> {
    const id = sessionId(session);
    const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    try {
      await this.served.requestRollback(id, 'rollbackSession()', timeoutMs);
    } catch (error) {
      if (!(error instanceof AgentReinUnavailableError)) throw error;
      this.journal.append({ kind: 'RollbackRequested', sessionId: id, trigger: 'rollbackSession()', approvalTimeoutMs: timeoutMs });
      throw new AgentReinUnavailableError(
        `${error.message}; the rollback of session ${id} is journaled in ${this.journal.path} and requested as soon as AgentRein answers`,
      );
    }
    const now = await this.served.followRollback(id, timeoutMs);
    const failure = RollbackFailedError.of(now);
    if (failure !== null) throw failure;
    return now;
  }

  // approvals ----------------------------------------------------------------------------------------
  /** Every approval request (of one status, if given), page after page. */
  async listApprovals(options: { status?: ApprovalStatus; limit?: number } = {}): Promise<ListedApproval[]> {
    return this.served.listApprovals({ status: options.status, limit: options.limit, include: INCLUDED_FIELDS });
  }

  getApproval(approvalId: string): Promise<Approval> {
    return this.served.getApproval(approvalId);
  }

  /** Approve a request; a rollback approval's rollback then goes on in the server (followed until it ends
   *  or waits for another reviewer). */
  approve(approvalId: string, decision: Decision = {}): Promise<Approval> {
    return this.decide(approvalId, 'approve', decision);
  }

  reject(approvalId: string, decision: Decision = {}): Promise<Approval> {
    return this.decide(approvalId, 'reject', decision);
  }

  private async decide(approvalId: string, verb: 'approve' | 'reject', decision: Decision): Promise<Approval> {
    const decided = await this.served.decide(approvalId, verb, decision.reviewer ?? null, decision.reason ?? null);
    try {
      await this.served.followRollback(decided.sessionId, DEFAULT_TIMEOUT_MS, { stopAtReview: true });
      return await this.served.getApproval(approvalId);
    } catch (error) {
      // The decision was made: following the rollback it started is a courtesy, so its problems are said,
      // not thrown (a retry of the decision would be refused as already decided).
      if (!(error instanceof AgentReinError)) throw error;
      warn(`AgentRein could not follow the rollback of session ${decided.sessionId}: ${error.message}`);
      return decided;
    }
  }

  // policies -----------------------------------------------------------------------------------------
  async addPolicy(policy: NewPolicy): Promise<Policy> {
    if (typeof policy !== 'object' || policy === null || typeof policy.name !== 'string' || !policy.name) {
      throw new ValidationError('name', 'a policy needs a name');
    }
    return this.served.addPolicy({
      name: policy.name,
      effect: policy.effect,
      connector: policy.connector ?? null,
      apiName: policy.apiName ?? null,
      agentId: policy.agentId ?? null,
      operationType: policy.operationType ?? null,
      beforeExecution: policy.beforeExecution ?? false,
      approvalTimeoutMs: policy.approvalTimeoutMs ?? null,
      enabled: policy.enabled ?? true,
    });
  }

  /** Send what the outbox holds (journaled entries and the last calls' confirmations, in the order written);
   *  what cannot be sent stays in the journal, for the next process on it. */
  async close(): Promise<void> {
    LIVE.delete(this.live);
    this.undos.close();
    try {
      await this.journal.flush();
    } catch (error) {
      if (!(error instanceof AgentReinUnavailableError)) throw error;
    } finally {
      this.journalUnsent();
    }
  }

  /** @internal Whether confirmations wait to be sent. */
  hasPending(): boolean {
    return this.journal.unsent().length > 0;
  }

  /** @internal What is pending is sent; what the server does not take goes to the journal. */
  async sendPending(): Promise<void> {
    try {
      await this.journal.flush();
    } catch {
      // left to the journal, below
    }
    // What is still unsent (AgentRein out of reach, or a send that failed) is not tried at every next
    // 'beforeExit' again, which would keep the process alive.
    if (this.hasPending()) this.journalUnsent();
  }

  /** @internal Outcomes the server has not taken go to the journal, replayed later. */
  journalUnsent(): void {
    this.journal.forget(); // each is in the journal already, held by this client: let it go
  }
}

/** The longest a Node timer waits (2**31 - 1 ms). */
const MAX_TIMER_MS = 2 ** 31 - 1;

/** Every open AgentRein (weakly held): when the process leaves, what each could not send is journaled. */
const LIVE = new Set<WeakRef<AgentRein>>();
const FORGET = new FinalizationRegistry<WeakRef<AgentRein>>((ref) => LIVE.delete(ref));
// The last calls' confirmations are sent when the agent's work is done (the event loop is empty), and
// journaled if the process exits before they could be.
process.on('beforeExit', () => {
  for (const ref of LIVE) {
    const agentrein = ref.deref();
    if (agentrein?.hasPending()) void agentrein.sendPending();
  }
});
process.once('exit', () => {
  for (const ref of LIVE) ref.deref()?.journalUnsent();
});

function sessionId(session: SessionRef): string {
  const id = typeof session === 'string' ? session : session?.id;
  if (typeof id !== 'string' || !id) throw new ValidationError('session', 'must be a session or its id');
  return id;
}

function offlineSession(id: string, agentId: string, intent: string, sandbox: boolean, openedAt: string): Session {
  return {
    id,
    agentId,
    intent,
    sandbox,
    status: 'ACTIVE',
    displayStatus: 'ACTIVE',
    createdAt: openedAt,
    lastActivityAt: openedAt,
    completedAt: null,
    actionCount: 0,
    recordedWith: null,
    actions: [],
    approvals: [],
    verification: null,
    actionsCursor: null,
  };
}

function warn(message: string): void {
  process.emitWarning(message, { type: 'AgentReinWarning' });
}
