/**
 * Confirmations (`agentrein.confirmations`): a call that succeeded is confirmed with the session's next
 * request, so a wrapped call costs the agent one request to the server (its write-ahead record), not two.
 *
 * The outcome (the redacted response and the undo) is kept in memory and the agent's call returns. The
 * session's next write-ahead record carries it (`confirm`), applied first by the server in the same
 * transaction; what no next call carried within `FLUSH_DELAY_MS` is sent on its own (`PATCH`), and so is
 * everything pending before any other request of the client (reading a session, completing, rolling back),
 * so what the agent reads next shows its last call's outcome, and a rollback never runs before the earlier
 * successes are confirmed. Each outcome is also written to the journal (`journal.ts`) the moment it is
 * kept, held by this client, and removed once the server has it: outcomes a process could not send before
 * it ended (the server out of reach, a SIGTERM, a crash) are sent by the next process on that journal.
 */

import { AgentReinError, AgentReinUnavailableError, InvalidTransitionError } from './errors.js';
import type { WireUndo } from './undo.js';
import type { Json } from './connector.js';

/** How long an outcome waits for the session's next request before it is sent on its own. */
export const FLUSH_DELAY_MS = 100;
/** The most confirmations one write-ahead record carries (the server's `MAX_CONFIRMATIONS`). */
export const MAX_CONFIRMATIONS = 100;
const RETRY_DELAY_MS = 2000;
const MAX_RETRY_DELAY_MS = 60_000;

export interface Outcome {
  readonly sessionId: string;
  readonly actionId: string;
  readonly response: Json;
  readonly undo: WireUndo;
}

/** Where kept outcomes are written until the server has them (the journal). */
export interface OutcomeStore {
  /** Write `outcome` down; the id to `release` it by. */
  hold(outcome: Outcome): string;
  /** These are settled (applied, or refused for good): no longer written down. */
  release(ids: readonly string[]): void;
}

export class Confirmations {
  private pending: Outcome[] = [];
  private store: OutcomeStore | undefined;
  private readonly written = new Map<Outcome, string>();
  private inFlight = new Set<Outcome>();
  private sending: Promise<void> = Promise.resolve();
  private timer: NodeJS.Timeout | undefined;
  private retryDelay = RETRY_DELAY_MS;

  constructor(
    private readonly send: (outcome: Outcome) => Promise<void>,
    private readonly warn: (message: string) => void,
  ) {}

  /** Write every outcome kept from now on to `store` until it is settled. */
  writeTo(store: OutcomeStore): void {
    this.store = store;
  }

  keep(outcome: Outcome): void {
    if (this.store !== undefined) this.written.set(outcome, this.store.hold(outcome));
    this.pending.push(outcome);
    this.schedule(FLUSH_DELAY_MS);
  }

  /** The session's pending outcomes, for its next write-ahead record to carry; the caller then reports them
   *  `settled` or `putBack`. */
  take(sessionId: string): Outcome[] {
    const taken = this.pending.filter((o) => o.sessionId === sessionId).slice(0, MAX_CONFIRMATIONS);
    this.pending = this.pending.filter((o) => !taken.includes(o));
    for (const o of taken) this.inFlight.add(o);
    return taken;
  }

  /** These are applied, or refused for good. */
  settled(outcomes: readonly Outcome[]): void {
    this.landed(outcomes);
    const ids = outcomes.flatMap((o) => {
      const id = this.written.get(o);
      this.written.delete(o);
      return id === undefined ? [] : [id];
    });
    this.store?.release(ids);
  }

  /** These were not (or may not have been) applied: sent again, before anything kept since. */
  putBack(outcomes: readonly Outcome[]): void {
    this.landed(outcomes);
    this.pending.unshift(...outcomes);
    if (outcomes.length) this.schedule(FLUSH_DELAY_MS);
  }

  /** Outcomes not yet settled. */
  unsent(): Outcome[] {
    return [...this.pending, ...this.inFlight];
  }

  /** Send every pending outcome, one at a time and in order; throws `AgentReinUnavailableError` (keeping
   *  the unsent ones) when the server cannot be reached. */
  flush(): Promise<void> {
    const run = this.sending.then(() => this.sendPending());
    this.sending = run.catch(() => undefined);
    return run;
  }

  /** Stop sending: what is unsettled stays written down for the journal's replays; stop the timer (the
   *  process may exit). */
  forget(): void {
    this.pending = [];
    this.inFlight.clear();
    this.written.clear();
    clearTimeout(this.timer);
  }

  private landed(outcomes: readonly Outcome[]): void {
    for (const o of outcomes) this.inFlight.delete(o);
  }

  private async sendPending(): Promise<void> {
    while (this.pending.length) {
      const outcome = this.pending.shift()!;
      this.inFlight.add(outcome);
      try {
        await this.send(outcome);
      } catch (error) {
        if (error instanceof AgentReinUnavailableError) {
          this.putBack([outcome]);
          throw error;
        }
        if (!(error instanceof InvalidTransitionError)) {
          // Refused for good (settled meanwhile is the harmless case above): the action stays CLEARED.
          if (!(error instanceof AgentReinError)) {
            this.putBack([outcome]);
            throw error;
          }
          this.warn(`AgentRein refused the confirmation of action ${outcome.actionId}; it stays CLEARED: ${error.message}`);
        }
      }
      this.settled([outcome]);
    }
  }

  private schedule(delayMs: number): void {
    if (this.timer !== undefined) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.flush().then(
        () => {
          this.retryDelay = RETRY_DELAY_MS;
        },
        () => {
          // Kept, and sent by the client's next request meanwhile; tried again less and less often.
          this.schedule(this.retryDelay);
          this.retryDelay = Math.min(this.retryDelay * 2, MAX_RETRY_DELAY_MS);
        },
      );
    }, delayMs);
    this.timer.unref(); // a pending confirmation does not keep the process alive: exit sends or journals it
  }
}
