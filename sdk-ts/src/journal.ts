/**
 * The local journal of `failureMode: 'open'` (`agentrein.journal`): what happened while AgentRein could not
 * be reached. A warning says once that calls now run unprotected; every call made meanwhile, every outcome
 * that could not be reported, a session opened meanwhile (with an id chosen here), its completion and the
 * rollbacks that could not be asked for are appended to a file beside the agent (`$AGENTREIN_JOURNAL`, else
 * `./agentrein-journal.jsonl`). Once AgentRein answers again the entries are replayed in the order they were
 * written (before anything newer is recorded), each deleted once AgentRein has it: a call becomes an action
 * recorded as it happened (deduplicated by its idempotency key), an outcome confirms or fails its action.
 *
 * The Python journal is a SQLite file; Node 20 has no SQLite of its own, so this one is JSON lines, one
 * entry a line, tagged with the server and key it belongs to (one file may hold several servers' entries).
 */

import { randomBytes } from 'node:crypto';
import { appendFileSync, existsSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';

import type { Json, OperationType } from './connector.js';
import { AgentReinError, AgentReinUnavailableError, InvalidTransitionError, ValidationError } from './errors.js';
import type { WireUndo } from './served.js';

export const JOURNAL_ENV = 'AGENTREIN_JOURNAL';
export const DEFAULT_JOURNAL = 'agentrein-journal.jsonl';

/** A call that ran while AgentRein could not be reached (`POST /sessions/{id}/journal`). */
export interface ExecutedCall {
  readonly idempotencyKey: string;
  readonly connector: string;
  readonly apiName: string;
  readonly operationType: OperationType;
  readonly status: 'SUCCESS' | 'FAILED';
  readonly payload: Json;
  readonly response: Json;
  readonly undo: WireUndo | null;
  readonly error: string | null;
}

/** How a recorded action's call ended, when AgentRein could not be told at the time. */
export interface LateOutcome {
  readonly actionId: string;
  readonly succeeded: boolean;
  readonly response?: Json;
  readonly undo?: WireUndo | null;
  readonly error?: string;
}

/** One thing AgentRein is to learn about session `sessionId`: exactly one of the other fields is set. */
export type Entry = { readonly sessionId: string } & (
  | { readonly call: ExecutedCall }
  | { readonly outcome: LateOutcome }
  | { readonly opened: { agentId: string; intent: string; sandbox: boolean; openedAt: string } }
  | { readonly completedAt: string }
  | { readonly rollback: { trigger: string; approvalTimeoutMs: number } }
  | { readonly loggingFailure: { reason: string; connector: string | null } }
);

/** What replaying needs of the server (`served.ts`). */
export interface Replayer {
  newSession(agentId: string, intent: string, sandbox: boolean, sessionId?: string): Promise<unknown>;
  recordExecutedAction(sessionId: string, call: ExecutedCall): Promise<unknown>;
  sendOutcome(sessionId: string, outcome: LateOutcome): Promise<unknown>;
  completeSession(sessionId: string): Promise<unknown>;
  requestRollback(sessionId: string, trigger: string, approvalTimeoutMs: number): Promise<unknown>;
  failSession(sessionId: string, reason: string, connector: string | null): Promise<unknown>;
}

interface Line {
  readonly backend: string;
  readonly entry: Entry;
  readonly problem?: string;
}

export function journalFile(path?: string): string {
  return resolve(path || process.env[JOURNAL_ENV] || DEFAULT_JOURNAL);
}

export class Journal {
  readonly path: string;
  private warned = false;
  private replaying: Promise<number> | null = null;

  constructor(
    readonly identity: string,
    path?: string,
  ) {
    this.path = journalFile(path);
  }

  /** `failureMode: 'open'`: say once that calls now run without AgentRein's protection. */
  warnUnavailable(error: AgentReinUnavailableError): void {
    if (this.warned) return;
    this.warned = true;
    process.emitWarning(
      `AgentRein is unavailable (${error.message}); calls run without approvals or rollback, and are journaled ` +
        `in ${this.path} until AgentRein is back`,
      { type: 'AgentReinWarning', code: 'AGENTREIN_UNAVAILABLE' },
    );
  }

  append(entry: Entry): void {
    appendFileSync(this.path, `${JSON.stringify({ backend: this.identity, entry } satisfies Line)}\n`);
  }

  /** The entries of this server and key waiting to be replayed, in order. */
  entries(): Entry[] {
    return this.read()
      .filter((line) => line.backend === this.identity && line.problem === undefined)
      .map((line) => line.entry);
  }

  /** Send the waiting entries in order, deleting each once AgentRein has it; stop at the first that cannot
   *  be sent because AgentRein is still unavailable. An entry AgentRein refuses is kept aside with the
   *  reason. One replay at a time; returns how many were replayed. */
  replay(server: Replayer): Promise<number> {
    if (!existsSync(this.path)) return Promise.resolve(0);
    this.replaying ??= this.replayAll(server).finally(() => {
      this.replaying = null;
    });
    return this.replaying;
  }

  private async replayAll(server: Replayer): Promise<number> {
    const lines = this.read();
    const kept: Line[] = [];
    let replayed = 0;
    let stopped = false;
    for (const line of lines) {
      if (stopped || line.backend !== this.identity || line.problem !== undefined) {
        kept.push(line);
        continue;
      }
      try {
        await apply(server, line.entry);
        replayed++;
      } catch (error) {
        if (error instanceof AgentReinError && !(error instanceof AgentReinUnavailableError)) {
          kept.push({ ...line, problem: error.message });
          continue;
        }
        kept.push(line);
        stopped = true; // still out of reach (or a bug): tried again later, in order
      }
    }
    // Entries appended while replaying (this process journals nothing then: the write-ahead waits).
    const added = this.read().slice(lines.length);
    this.write([...kept, ...added]);
    return replayed;
  }

  private read(): Line[] {
    if (!existsSync(this.path)) return [];
    const text = readFileSync(this.path, 'utf8');
    if (text.startsWith('SQLite format 3')) {
      throw new ValidationError(JOURNAL_ENV, `${this.path} is the Python SDK's SQLite journal; give this SDK a file of its own`);
    }
    return text
      .split('\n')
      .filter((l) => l.trim())
      .map((l) => JSON.parse(l) as Line);
  }

  private write(lines: readonly Line[]): void {
    const temporary = `${this.path}.${randomBytes(4).toString('hex')}.tmp`;
    writeFileSync(temporary, lines.map((l) => `${JSON.stringify(l)}\n`).join(''));
    renameSync(temporary, this.path); // atomic: a crash leaves the old file or the new, never half of one
  }
}

async function apply(server: Replayer, entry: Entry): Promise<void> {
  const id = entry.sessionId;
  if ('opened' in entry) await server.newSession(entry.opened.agentId, entry.opened.intent, entry.opened.sandbox, id);
  else if ('call' in entry) await server.recordExecutedAction(id, entry.call);
  else if ('outcome' in entry) {
    try {
      await server.sendOutcome(id, entry.outcome);
    } catch (error) {
      // Applied by an earlier replay whose answer was lost, or overtaken (a reviewer decided meanwhile).
      if (!(error instanceof InvalidTransitionError)) throw error;
    }
  } else if ('completedAt' in entry) await server.completeSession(id);
  else if ('rollback' in entry) await server.requestRollback(id, entry.rollback.trigger, entry.rollback.approvalTimeoutMs);
  else await server.failSession(id, entry.loggingFailure.reason, entry.loggingFailure.connector);
}
