/**
 * The undos the server hands back to this process (DESIGN §4a; the twin of `agentrein._undo_taker`).
 *
 * The server cannot run every undo: an MCP server the agent reaches over stdio is reachable from the agent's
 * process alone. The server offers such an undo to the process that holds the client, and this taker, running
 * while this process holds clients of a connector that runs its own undos (`Connector.runUndo`), takes it
 * (`POST /undos/claim`, a long-poll under a lease), runs it through the client the session wrapped (the newest
 * open one, else one `reopen`ed as it was), renewing its lease while the undo runs (`POST /undos/{actionId}/renew`),
 * and reports the outcome (`POST /undos/{actionId}/outcome`). The
 * rollback waits for it meanwhile. The long-poll never keeps the process alive (`background` requests,
 * unref'd pauses), and `close()` stops it.
 */

import { setTimeout as sleep } from 'node:timers/promises';

import type { Connector, Json, UndoConfig } from './connector.js';
import { AgentReinError, AgentReinUnavailableError, UndoError } from './errors.js';
import { REDACTED, type Redactor } from './redaction.js';
import type { Served } from './served.js';
import { segment } from './transport.js';
import type { components } from './wire.js';

type HandedUndo = components['schemas']['HandedUndoAnswer'];

/** How long one claim waits at the server for an undo to be offered (s): short, for a server that stops waits
 *  for the requests it is answering, this one too. */
export const CLAIM_WAIT_SECONDS = 5;
/** The pause after the server could not be reached (or refused a claim) before the next claim. */
const AFTER_TROUBLE_MS = 2000;
/** How often an outcome is sent while the server cannot be reached, well within the lease. */
const REPORT_ATTEMPTS = 10;
/** The most sessions one claim names (the server takes up to 1,000). */
const MOST_SESSIONS = 1000;
/** A taken undo's lease is renewed after this part of it, while the undo runs: twice more before it would end. */
const RENEW_EVERY = 1 / 3;
/** The lease (s) of a server older than renewals, which sends no `leaseSeconds`: its own, as Python's taker assumes. */
const OLDER_SERVERS_LEASE_SECONDS = 120;

/** A wrapped client as the taker runs undos through it. */
interface Held {
  readonly connector: Connector;
  readonly bound: unknown;
}

export class UndoTaker {
  /** session id -> the clients wrapped for it, oldest first. */
  readonly #held = new Map<string, Held[]>();
  readonly #stop = new AbortController();
  #running = false;

  constructor(
    private readonly served: Served,
    private readonly redactor: Redactor,
    private readonly log: (message: string) => void,
  ) {}

  /** A client was wrapped for `sessionId`: take the undos of the session its connector runs itself. */
  wrapped(sessionId: string, connector: Connector, bound: unknown): void {
    if (connector.runUndo === undefined || this.#stop.signal.aborted) return;
    this.#held.set(sessionId, [...(this.#held.get(sessionId) ?? []), { connector, bound }]);
    if (!this.#running) {
      this.#running = true;
      void this.take().finally(() => (this.#running = false));
    }
  }

  /** The session ended (completed): no undo of it will be offered. */
  forget(sessionId: string): void {
    this.#held.delete(sessionId);
  }

  /** Take no more undos (a claim under way is ended). */
  close(): void {
    this.#stop.abort();
  }

  private async take(): Promise<void> {
    while (!this.#stop.signal.aborted && this.#held.size > 0) {
      // The sessions held longest are left out past the server's limit: those wrapped for last are named.
      const sessions = [...this.#held.keys()].slice(-MOST_SESSIONS);
      const connectors = [...new Set([...this.#held.values()].flat().map((h) => h.connector.name))].sort();
      const began = Date.now();
      let taken: HandedUndo | null;
      try {
        // The server holds the claim only while one of these sessions is being rolled back.
        const options = {
          body: { sessions, connectors },
          query: { wait: CLAIM_WAIT_SECONDS },
          waitMs: CLAIM_WAIT_SECONDS * 1000,
          background: true,
          signal: this.#stop.signal,
        };
        taken = (await this.served.connection.call<{ undo: HandedUndo | null }>('POST', '/undos/claim', options)).undo;
      } catch (error) {
        if (this.#stop.signal.aborted) return;
        if (!(error instanceof AgentReinUnavailableError)) {
          this.log(`AgentRein could not take the undos handed to this process: ${String(error)}`);
        }
        await sleep(AFTER_TROUBLE_MS, undefined, { ref: false });
        continue;
      }
      if (taken !== null) {
        await this.run(taken); // taken: run and reported, even if this client is closing meanwhile
      } else {
        const left = CLAIM_WAIT_SECONDS * 1000 - (Date.now() - began);
        if (left > 0) await sleep(left, undefined, { ref: false, signal: this.#stop.signal }).catch(() => undefined);
      }
    }
  }

  private async run(taken: HandedUndo): Promise<void> {
    let error: string | null = null;
    const renewing = this.keepLease(taken);
    try {
      await this.undo(taken);
    } catch (failure) {
      // The rollback stops here and says why; this process goes on.
      const text = failure instanceof Error ? `${failure.name}: ${failure.message}` : String(failure);
      error = this.redactor.redactText(text);
    } finally {
      await renewing.stop(); // no renewal lands after the report (it would be refused, and said so)
    }
    const how = error === null ? 'ran' : 'could not run';
    this.log(`AgentRein ${how} the undo of ${taken.apiName} (session ${taken.sessionId}), handed to this process: ${error ?? 'done'}`);
    const body = { leaseId: taken.leaseId, succeeded: error === null, error };
    for (let attempt = 1; ; attempt += 1) {
      // The same report again is answered as the first was: sent again while the server cannot be reached.
      try {
        // Straight to the server, as the Python taker's: not behind the journal's sending, which may outlast the lease.
        await this.served.connection.call('POST', `/undos/${segment(taken.actionId)}/outcome`, { body });
        return;
      } catch (failure) {
        if (!(failure instanceof AgentReinError)) throw failure;
        if (!(failure instanceof AgentReinUnavailableError) || attempt === REPORT_ATTEMPTS) {
          this.log(`AgentRein could not report the undo of ${taken.apiName}: ${failure.message}`);
          return;
        }
        await sleep(AFTER_TROUBLE_MS, undefined, { ref: false });
      }
    }
  }

  /** Renew the lease on `taken` every third of it while its undo runs, so that a slow undo is reported within
   *  it; a renewal the server could not be reached for is tried again at the next third. `stop()` ends it and
   *  waits for a renewal under way. */
  private keepLease(taken: HandedUndo): { stop: () => Promise<void> } {
    const finished = new AbortController();
    // The wire type says it is always there; a server older than renewals leaves it out (sleep(NaN) is 1 ms).
    const leaseSeconds = (taken.leaseSeconds as number | undefined) ?? OLDER_SERVERS_LEASE_SECONDS;
    const renewing = (async () => {
      for (;;) {
        try {
          await sleep(leaseSeconds * 1000 * RENEW_EVERY, undefined, { ref: false, signal: finished.signal });
        } catch {
          return; // the undo has ended
        }
        try {
          // Straight to the server, as the claim: not behind the journal's sending, which may outlast the lease.
          const renew = `/undos/${segment(taken.actionId)}/renew`;
          await this.served.connection.call('POST', renew, { body: { leaseId: taken.leaseId } });
        } catch (failure) {
          if (failure instanceof AgentReinUnavailableError) continue;
          // The lease ended (the undo has failed), or the server refuses: say so, and renew no more.
          const reason = failure instanceof Error ? failure.message : String(failure);
          this.log(`AgentRein could not keep the lease on the undo of ${taken.apiName}: ${reason}`);
          return;
        }
      }
    })();
    return {
      stop: async () => {
        finished.abort();
        await renewing;
      },
    };
  }

  /** Through the newest open client of the session for the undo's connector, else one reopened as it was. */
  private async undo(taken: HandedUndo): Promise<void> {
    const { type, requireApproval, ...params } = taken.undo as { type: string; requireApproval?: boolean } & { [key: string]: Json };
    const undo: UndoConfig = { type, params, requireApproval: requireApproval ?? false };
    // A client of the undo's own service only (each MCP server is one).
    const held = (this.#held.get(taken.sessionId) ?? []).filter(
      (h) => h.connector.name === taken.connector && (h.connector.serves?.(h.bound, undo) ?? true),
    );
    const newest = held[held.length - 1];
    if (newest?.connector.runUndo === undefined) {
      throw new UndoError(`this process holds no '${taken.connector}' client of session ${taken.sessionId} any more`);
    }
    const redacted = redactedParam(params);
    if (redacted !== null) {
      // Sent as stored, it would not be the undo the agent's call described.
      throw new UndoError(
        `the undo of ${taken.apiName} cannot run: its ${redacted} held a secret, which AgentRein does not store; undo this action by hand`,
      );
    }
    const connector = newest.connector;
    const open = [...held].reverse().find((h) => !(connector.isClosed?.(h.bound) ?? false));
    const client = open?.bound ?? (connector.reopen ? connector.reopen(newest.bound) : newest.bound);
    await connector.runUndo!(undo, client, taken.undoIdempotencyKey);
  }
}

/** The name of the first parameter (`calls[0].arguments.path`) whose stored value was redacted, if any (as
 *  `agentrein_core.runner` refuses such an undo). */
function redactedParam(value: Json, where = ''): string | null {
  if (typeof value === 'string') return value.includes(REDACTED) ? where || 'parameters' : null;
  if (typeof value !== 'object' || value === null) return null;
  const entries: [string, Json][] = Array.isArray(value)
    ? value.map((v, i) => [`${where}[${i}]`, v])
    : Object.entries(value).map(([k, v]) => [where ? `${where}.${k}` : k, v]);
  for (const [name, v] of entries) {
    const found = redactedParam(v, name);
    if (found !== null) return found;
  }
  return null;
}
