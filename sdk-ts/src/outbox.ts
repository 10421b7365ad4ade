/**
 * The SDK's local outbox (`agentrein._outbox`): what AgentRein is still to learn, kept in one file until it
 * is sent, as one append-only log of typed entries (`Entry`, tagged by `kind`), and sent by one replayer.
 *
 * What happened while AgentRein could not be reached (`failureMode: 'open'`): a warning says once that calls
 * now run unprotected; every call made meanwhile (`CallRecorded`), every outcome that could not be reported
 * (`OutcomeReported`), a session opened meanwhile (`SessionStarted`, with an id chosen here), its completion
 * (`SessionCompleted`) and the rollbacks that could not be asked for (`RollbackRequested`, `LoggingFailed`)
 * are appended to a file in the user's state directory, one per server and key (`journal-<digest>.jsonl` in
 * `$XDG_STATE_HOME/agentrein` or `~/.local/state/agentrein`, in `~/Library/Application Support/agentrein` on
 * macOS, in `%LOCALAPPDATA%\agentrein` on Windows), where the next process on that server and key finds it
 * wherever it is started; `$AGENTREIN_JOURNAL` overrides. A call becomes an action recorded as it happened
 * (deduplicated by its idempotency key), an outcome confirms or fails its action.
 *
 * Confirmations in transit (`CallConfirmed`): a call that succeeded is confirmed with the session's next
 * request, so a wrapped call costs the agent one request to the server (its write-ahead record), not two. The
 * confirmation is kept in memory (`keep`) and the agent's call returns; the session's next write-ahead record
 * carries it (`take`, then `delivered` or `putBack`), applied first by the server in the same transaction.
 * Each is also written to the file the moment it is kept, as a line *held* by its outbox, and removed once
 * the server has it: a process killed before it sent its last confirmations (SIGTERM, SIGKILL, a crash)
 * leaves them here, and the next process on this file sends them. A held line is left alone while its holder
 * lives.
 *
 * One replayer sends everything waiting for this server and key, journaled entries and kept confirmations
 * alike, in the order they were written (the file's order; a confirmation the file could not take goes last),
 * one entry at a time through one dispatch (`apply`), one send at a time. Two ways in:
 * - `replay()`, before anything new is recorded (a write-ahead record): the journaled entries and the
 *   confirmations written before the last of them; those written after it ride with the write-ahead record.
 *   Nothing journaled: it returns at once, with no request.
 * - `flush()`, before any other request of the client, from the timer and at close: everything, once the
 *   confirmations already on their way (carried by a write-ahead record) have landed.
 * A replayed entry's own request goes through the client's request path, whose `flush()` then returns at
 * once: everything written before that entry has been sent.
 * A timer (`unref`'d: it never keeps the process alive) sends what no request sent: a confirmation after
 * `FLUSH_DELAY_MS`, and, when AgentRein could not be reached, everything again after a pause that doubles
 * from 2 s to 60 s. So journaled records reach AgentRein soon after it answers again without waiting for
 * the agent's next call (before, they waited for it).
 * Whatever the entry, a failure to send it means the same: AgentRein out of reach, the send stops and the
 * rest waits, in order, for the next try; an outcome or confirmation refused as an invalid transition was
 * applied already (an earlier send whose answer was lost, or a reviewer decided meanwhile) and is removed; any
 * other refusal of AgentRein's keeps the entry aside in the file with the reason (`problem`) and is warned;
 * anything else (a bug) is warned, and the send stops until the next try, never failing the agent's call.
 *
 * The Python outbox is a SQLite file; Node 20 has no SQLite of its own, so this one is JSON lines, one
 * entry a line, tagged with the server and key it belongs to (one file may hold several servers' entries).
 * Several processes may share one file (agents on one server and key do): every change of it (an
 * append, a replay's rewrite) is made holding a lock file beside it (`<journal>.lock`, created exclusively),
 * so that no process's rewrite drops a line another appended. A replay sends its entries without the lock
 * and then removes, under it, exactly the lines it sent (each line has an id of its own).
 *
 * What an older version left is read once and emptied: its lines at this place, written before entries had
 * a `kind` (one of six fields set), are read as the entries they are; and versions before the state
 * directory kept one journal for all servers and keys in the working directory (`./agentrein-journal.jsonl`):
 * an outbox at the default location takes over its own lines from there when it is made (`Outbox.adopt`), so
 * that an upgraded agent replays what an older one left.
 */

import { AsyncLocalStorage } from 'node:async_hooks';
import { createHash, randomBytes } from 'node:crypto';
import {
  appendFileSync,
  closeSync,
  existsSync,
  mkdirSync,
  openSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join, resolve } from 'node:path';

import type { Json, OperationType } from './connector.js';
import { AgentReinError, AgentReinUnavailableError, InvalidTransitionError, ValidationError } from './errors.js';
import type { WireUndo } from './undo.js';

export const JOURNAL_ENV = 'AGENTREIN_JOURNAL';
/** Where older versions kept the journal, in the working directory. */
const FORMER_JOURNAL = 'agentrein-journal.jsonl';

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
  /** `false`: a failure the agent only records, which rolls nothing back (absent: a failure rolls back). */
  readonly rollsBack?: boolean;
}

/** A session opened while AgentRein could not be reached; its id was chosen here. */
export interface SessionStarted {
  readonly kind: 'SessionStarted';
  readonly sessionId: string;
  readonly agentId: string;
  readonly intent: string;
  readonly sandbox: boolean;
  readonly openedAt: string;
}

/** A call that ran while AgentRein could not be reached (no write-ahead record), and how it ended. */
export interface CallRecorded {
  readonly kind: 'CallRecorded';
  readonly sessionId: string;
  readonly call: ExecutedCall;
}

/** How a recorded action's call ended, when AgentRein could not be told at the time. */
export interface OutcomeReported {
  readonly kind: 'OutcomeReported';
  readonly sessionId: string;
  readonly actionId: string;
  readonly succeeded: boolean;
  readonly response?: Json;
  readonly undo?: WireUndo | null;
  readonly error?: string;
  /** false: a failure the agent only records (`Connector.failureIn`), which rolls nothing back. */
  readonly rollsBack?: boolean;
}

/** The agent completed a session opened while AgentRein could not be reached. */
export interface SessionCompleted {
  readonly kind: 'SessionCompleted';
  readonly sessionId: string;
  readonly completedAt: string;
}

/** A rollback the agent asked for while AgentRein could not be reached. */
export interface RollbackRequested {
  readonly kind: 'RollbackRequested';
  readonly sessionId: string;
  readonly trigger: string;
  readonly approvalTimeoutMs: number;
}

/** Action logging failed and AgentRein could not then be told: the session is to be rolled back. */
export interface LoggingFailed {
  readonly kind: 'LoggingFailed';
  readonly sessionId: string;
  readonly reason: string;
  readonly connector: string | null;
}

/** A recorded call that succeeded, its confirmation in transit to the server. */
export interface CallConfirmed {
  readonly kind: 'CallConfirmed';
  readonly sessionId: string;
  readonly actionId: string;
  readonly response: Json;
  readonly undo: WireUndo;
}

/** One thing AgentRein is to learn about session `sessionId`. */
export type Entry = SessionStarted | CallRecorded | OutcomeReported | SessionCompleted | RollbackRequested | LoggingFailed | CallConfirmed;

/** What the replayer needs of the server (`served.ts`): a request for each kind of entry. */
export interface Replayer {
  newSession(agentId: string, intent: string, sandbox: boolean, sessionId?: string): Promise<unknown>;
  recordExecutedAction(sessionId: string, call: ExecutedCall): Promise<unknown>;
  sendOutcome(outcome: OutcomeReported | CallConfirmed): Promise<unknown>;
  completeSession(sessionId: string): Promise<unknown>;
  requestRollback(sessionId: string, trigger: string, approvalTimeoutMs: number): Promise<unknown>;
  failSession(sessionId: string, reason: string, connector: string | null): Promise<unknown>;
}

interface Line {
  /** The line's own id: a replay removes exactly the lines it sent. */
  readonly id: string;
  readonly backend: string;
  /** As it was written: a former line keeps its form (an older process on the file still reads it). */
  readonly entry: Entry | FormerEntry;
  readonly problem?: string;
  /** A confirmation its process still sends itself (`Outbox.hold`), while that process lives. */
  readonly holder?: { readonly pid: number; readonly token: string };
}

/** The holders of this process still sending what they hold. */
const LIVE_HOLDERS = new Set<string>();

/** How long a journal lock may be held before it is taken as left behind by a process that died (its
 *  holders keep it for one file write). */
const STALE_LOCK_MS = 10_000;
/** How long a process waits for the journal lock before it gives up with an error. */
const LOCK_WAIT_MS = 30_000;
const sleeper = new Int32Array(new SharedArrayBuffer(4));

/** Where the journal of the recorder `identity` names is: `path`, else `$AGENTREIN_JOURNAL`, else a file of
 *  its own in the user's state directory, named by a digest of `identity` (which names a key only by a
 *  digest of it), as the Python SDK keeps its own (`platformdirs.user_state_dir`). */
export function journalFile(identity: string, path?: string): string {
  const given = path || process.env[JOURNAL_ENV];
  if (given) return resolve(given);
  const digest = createHash('sha256').update(identity).digest('hex').slice(0, 16);
  return join(stateDirectory(), `journal-${digest}.jsonl`);
}

function stateDirectory(): string {
  if (process.platform === 'win32') return join(process.env.LOCALAPPDATA || join(homedir(), 'AppData', 'Local'), 'agentrein');
  if (process.platform === 'darwin') return join(homedir(), 'Library', 'Application Support', 'agentrein');
  return join(process.env.XDG_STATE_HOME || join(homedir(), '.local', 'state'), 'agentrein');
}

/** How long a confirmation waits for the session's next request before it is sent on its own. */
export const FLUSH_DELAY_MS = 100;
/** The most confirmations one write-ahead record carries (the server's `MAX_CONFIRMATIONS`). */
export const MAX_CONFIRMATIONS = 100;
/** The pause before the timer tries again after AgentRein could not be reached, doubled after each failure. */
export const RETRY_DELAY_MS = 2000;
const MAX_RETRY_DELAY_MS = 60_000;

/** The outbox whose replayer is sending, in the async context of the entry it sends: that entry's own request
 *  flushes the same outbox, which must return at once rather than wait for (or start) another send. */
const SENDING = new AsyncLocalStorage<Outbox>();

export interface OutboxOptions {
  /** The file (default `$AGENTREIN_JOURNAL`, else one per server and key in the user's state directory). */
  readonly path?: string | undefined;
  /** How the outbox says what it could not send (default `process.emitWarning`). */
  readonly warn?: (message: string) => void;
}

/** A confirmation kept in memory until it is sent; `seq` is the order it was kept in. */
interface Kept {
  readonly confirmation: CallConfirmed;
  readonly seq: number;
  /** Its line in the file; undefined when the file could not take it. */
  readonly line: string | undefined;
}

/** A write-ahead record carrying confirmations: `landed` resolves once it has answered. */
interface OnTheirWay {
  readonly landed: Promise<void>;
  readonly land: () => void;
}

/** An entry waiting to be sent, and where it is written down. */
interface Waiting {
  readonly entry: Entry;
  readonly line: string | undefined;
  /** Set for a confirmation this outbox keeps in memory, else the entry is a line of the file. */
  readonly kept?: Kept;
}

export class Outbox {
  readonly path: string;
  private readonly warn: (message: string) => void;
  /** This outbox's name on the confirmations it writes to the file, left to the replays once it lets go. */
  private readonly holder = randomBytes(8).toString('hex');
  private warned = false;
  private warnedTorn = false;
  /** The lines of the last read that were not JSON, moved aside by the next write. */
  private torn: string[] = [];
  private kept = 0;
  /** Kept confirmations not yet sent, in the order they were kept. */
  private pending: Kept[] = [];
  private readonly byConfirmation = new Map<CallConfirmed, Kept>();
  private readonly onTheirWay = new Map<Kept, OnTheirWay>();
  /** Confirmations the replayer is sending now. */
  private readonly sending = new Set<Kept>();
  /** The sends, one after another. */
  private chain: Promise<unknown> = Promise.resolve();
  private sends = 0;
  /** The last send that found AgentRein out of reach, and why. */
  private unreachable: { readonly send: number; readonly message: string } | undefined;
  private timer: NodeJS.Timeout | undefined;
  private retryDelay = RETRY_DELAY_MS;

  constructor(
    readonly identity: string,
    private readonly server: Replayer,
    options: OutboxOptions = {},
  ) {
    this.path = journalFile(identity, options.path);
    this.warn = options.warn ?? ((message) => process.emitWarning(message, { type: 'AgentReinWarning' }));
    LIVE_HOLDERS.add(this.holder);
    if (!options.path && !process.env[JOURNAL_ENV]) {
      try {
        this.adopt(resolve(FORMER_JOURNAL));
      } catch (error) {
        // The agent starts all the same (as the Python SDK does); the next client started here tries again.
        process.emitWarning(`could not take over the journal an older version left in ${resolve(FORMER_JOURNAL)}: ${String(error)}`, {
          type: 'AgentReinWarning',
        });
      }
    }
  }

  /** Move this server's and key's lines from `former` (an older version's journal) to the end of this one,
   *  in order; other servers' lines, lines held by a live process (their holder still releases them there)
   *  and lines that are not JSON stay. The former file's lock is held throughout, so that an older process
   *  appends or replays there only before or after; a crash after the append and before the removal leaves
   *  lines in both files, which is harmless: replaying is idempotent (a call is deduplicated by its
   *  idempotency key, a session's creation by its id, an outcome already applied is skipped). */
  private adopt(former: string): void {
    if (!existsSync(former)) return;
    const moved = locked(former, () => {
      if (!existsSync(former)) return 0; // another process took the last lines meanwhile
      const mine: string[] = [];
      const kept: string[] = [];
      for (const raw of readFileSync(former, 'utf8').split('\n')) {
        if (!raw.trim()) continue;
        const line = parsed(raw);
        const held = line?.holder !== undefined && alive(line.holder.pid);
        (line?.backend === this.identity && !held ? mine : kept).push(`${raw}\n`);
      }
      if (!mine.length) return 0;
      locked(this.path, () => appendFileSync(this.path, mine.join('')));
      if (kept.length) replaceFile(former, kept.join(''));
      else rmSync(former);
      return mine.length;
    });
    if (moved) {
      process.emitWarning(`moved ${moved} journal entr${moved === 1 ? 'y' : 'ies'} of this server and key from ${former} to ${this.path}`, {
        type: 'AgentReinWarning',
      });
    }
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

  /** Journal `entry` (AgentRein could not be reached): sent by the next replay, or by the timer. */
  append(entry: Entry): void {
    this.add({ id: randomBytes(8).toString('hex'), backend: this.identity, entry });
    this.tryLater();
  }

  /** The entries of this server and key waiting to be replayed, in order (confirmations this outbox keeps
   *  aside). */
  entries(): Entry[] {
    return this.read()
      .filter((line) => this.replayable(line))
      .map((line) => entryOf(line));
  }

  // confirmations in transit -------------------------------------------------------------------------

  /** A recorded call succeeded: its confirmation waits for the session's next write-ahead record
   *  (`take`), or any other request, or `FLUSH_DELAY_MS`. */
  keep(confirmation: CallConfirmed): void {
    let line: string | undefined;
    try {
      line = randomBytes(8).toString('hex');
      this.add({ id: line, backend: this.identity, entry: confirmation, holder: { pid: process.pid, token: this.holder } });
    } catch (error) {
      // Sent all the same, from memory: only a process killed before then loses it.
      line = undefined;
      this.warn(`AgentRein could not write the confirmation of action ${confirmation.actionId} to ${this.path}: ${String(error)}`);
    }
    const kept = { confirmation, seq: this.kept++, line };
    this.byConfirmation.set(confirmation, kept);
    this.pending.push(kept);
    this.schedule(FLUSH_DELAY_MS);
  }

  /** The session's pending confirmations, for its next write-ahead record to carry; the caller then reports
   *  them `delivered` or `putBack`. */
  take(sessionId: string): CallConfirmed[] {
    const taken = this.pending.filter((k) => k.confirmation.sessionId === sessionId).slice(0, MAX_CONFIRMATIONS);
    this.pending = this.pending.filter((k) => !taken.includes(k));
    for (const kept of taken) {
      let land = () => {};
      const landed = new Promise<void>((resolveLanded) => (land = resolveLanded));
      this.onTheirWay.set(kept, { landed, land });
    }
    return taken.map((k) => k.confirmation);
  }

  /** The server has these: no longer written down. Those `refused` (by action id, with the reason) were not
   *  applied and their success is not on record: kept aside in the file, as a refused entry is. */
  delivered(confirmations: readonly CallConfirmed[], refused: ReadonlyMap<string, string> = new Map()): void {
    const sent = new Set<string>();
    const setAside = new Map<string, string>();
    for (const confirmation of confirmations) {
      const kept = this.byConfirmation.get(confirmation);
      if (kept === undefined) continue;
      this.settle(kept);
      const problem = refused.get(confirmation.actionId);
      if (problem !== undefined) this.warn(`AgentRein refused ${described(confirmation)}; kept aside in ${this.path}: ${problem}`);
      if (kept.line === undefined) continue;
      if (problem === undefined) sent.add(kept.line);
      else setAside.set(kept.line, problem);
    }
    this.rewrite(sent, setAside);
  }

  /** These were not (or may not have been) applied: sent again, in the order they were kept. */
  putBack(confirmations: readonly CallConfirmed[]): void {
    for (const confirmation of confirmations) {
      const kept = this.byConfirmation.get(confirmation);
      if (kept !== undefined) this.requeue(kept);
    }
    if (confirmations.length) this.schedule(FLUSH_DELAY_MS);
  }

  /** The confirmations not yet settled. */
  unsent(): CallConfirmed[] {
    return [...this.byConfirmation.keys()];
  }

  /** Stop sending (the process exits, or the client closes): what is unsettled stays written down, held by
   *  no one, for the replays of this process or the next; the timer stops. */
  forget(): void {
    for (const way of this.onTheirWay.values()) way.land();
    this.onTheirWay.clear();
    this.sending.clear();
    this.byConfirmation.clear();
    this.pending = [];
    clearTimeout(this.timer);
    this.timer = undefined;
    LIVE_HOLDERS.delete(this.holder);
  }

  private settle(kept: Kept): void {
    this.land(kept);
    this.sending.delete(kept);
    this.byConfirmation.delete(kept.confirmation);
  }

  /** `kept` waits again, at its place in the order kept. */
  private requeue(kept: Kept): void {
    this.land(kept);
    this.sending.delete(kept);
    const at = this.pending.findIndex((k) => k.seq > kept.seq);
    this.pending.splice(at < 0 ? this.pending.length : at, 0, kept);
  }

  private land(kept: Kept): void {
    this.onTheirWay.get(kept)?.land();
    this.onTheirWay.delete(kept);
  }

  /** The lines `ids` are settled: gone from the file. */
  private add(line: Line): void {
    locked(this.path, () => appendFileSync(this.path, `${JSON.stringify(line)}\n`));
  }

  // the replayer -----------------------------------------------------------------------------------------

  /** Before anything new is recorded: send the journaled entries, and the confirmations written before the
   *  last of them. Nothing journaled: returns at once, sending nothing. Resolves to how many were sent;
   *  rejects with `AgentReinUnavailableError` when AgentRein could not be reached (the rest waits, in order). */
  async replay(): Promise<number> {
    if (SENDING.getStore() === this || !this.journaled()) return 0;
    return this.send(false);
  }

  /** Before any other request, from the timer and at close: send everything waiting, once the confirmations
   *  on their way have landed. Resolves and rejects as `replay`. */
  async flush(): Promise<number> {
    if (SENDING.getStore() === this) return 0; // an entry's own request: all that was written before it is sent
    return this.send(true);
  }

  /** Whether journaled entries (not this outbox's own confirmations) wait to be sent. */
  private journaled(): boolean {
    return existsSync(this.path) && this.read().some((line) => this.replayable(line));
  }

  private send(everything: boolean): Promise<number> {
    const asked = this.sends;
    const run = this.chain.then(() => this.sendWaiting(everything, asked));
    this.chain = run.catch(() => undefined);
    return run;
  }

  private async sendWaiting(everything: boolean, asked: number): Promise<number> {
    if (this.unreachable !== undefined && this.unreachable.send > asked) {
      // The send this one waited for found AgentRein out of reach: no second wait for the same answer.
      throw new AgentReinUnavailableError(this.unreachable.message);
    }
    const send = ++this.sends;
    // The confirmations a write-ahead record carries land (applied, or put back to be sent in their turn)
    // before anything else is sent: a rollback journaled after a success must find it confirmed.
    await Promise.all([...this.onTheirWay.values()].map((way) => way.landed));
    const sent = new Set<string>();
    const setAside = new Map<string, string>();
    let count = 0;
    let stop: AgentReinUnavailableError | 'bug' | undefined;
    try {
      for (const waiting of this.waiting(everything)) {
        const kept = waiting.kept;
        if (kept !== undefined) {
          if (!this.pending.includes(kept)) continue; // taken meanwhile by a write-ahead record
          this.pending = this.pending.filter((k) => k !== kept);
          this.sending.add(kept);
        }
        const result = await this.sendOne(waiting, sent, setAside);
        if (result === 'sent') count++;
        else if (result !== 'set aside') {
          stop = result;
          if (kept !== undefined) this.requeue(kept); // not `putBack`: the retry pause, not FLUSH_DELAY_MS
          break;
        }
      }
    } finally {
      this.rewrite(sent, setAside);
    }
    if (stop === undefined) {
      this.unreachable = undefined;
      this.retryDelay = RETRY_DELAY_MS;
      return count;
    }
    this.tryLater();
    if (stop === 'bug') return count;
    this.unreachable = { send, message: stop.message };
    throw stop;
  }

  /** Send `waiting`, noting its line `sent` or `setAside`; else why the send stops there. */
  private async sendOne(
    waiting: Waiting,
    sent: Set<string>,
    setAside: Map<string, string>,
  ): Promise<'sent' | 'set aside' | AgentReinUnavailableError | 'bug'> {
    const { entry, line, kept } = waiting;
    try {
      await SENDING.run(this, () => apply(this.server, entry));
    } catch (error) {
      if (error instanceof AgentReinUnavailableError) return error;
      if (!(error instanceof AgentReinError)) {
        this.warn(`AgentRein could not send ${described(entry)}; tried again later: ${String(error)}`);
        return 'bug';
      }
      this.warn(`AgentRein refused ${described(entry)}; kept aside in ${this.path}: ${error.message}`);
      if (kept !== undefined) this.settle(kept);
      if (line !== undefined) setAside.set(line, error.message);
      return 'set aside';
    }
    if (kept !== undefined) this.settle(kept);
    if (line !== undefined) sent.add(line);
    return 'sent';
  }

  /** What waits to be sent, in the order it was written: the file's lines of this server and key, a kept
   *  confirmation at its own line, then those the file could not take. `everything` false: up to the last
   *  journaled entry. */
  private waiting(everything: boolean): Waiting[] {
    const mine = new Map(this.pending.flatMap((k) => (k.line === undefined ? [] : [[k.line, k] as const])));
    const waiting: Waiting[] = [];
    for (const line of this.read()) {
      const kept = mine.get(line.id);
      if (kept !== undefined) waiting.push({ entry: kept.confirmation, line: line.id, kept });
      else if (this.replayable(line)) waiting.push({ entry: entryOf(line), line: line.id });
      mine.delete(line.id);
    }
    for (const kept of this.pending) {
      if (kept.line === undefined || mine.has(kept.line)) waiting.push({ entry: kept.confirmation, line: kept.line, kept });
    }
    if (everything) return waiting;
    return waiting.slice(0, waiting.findLastIndex((w) => w.kept === undefined) + 1);
  }

  /** Remove the lines `sent` and mark those `setAside` with their problem, in the file as it is now: lines
   *  other processes (or this one) appended meanwhile are kept. */
  private rewrite(sent: ReadonlySet<string>, setAside: ReadonlyMap<string, string>): void {
    if (!sent.size && !setAside.size) return;
    locked(this.path, () => {
      const kept = this.read()
        .filter((line) => !sent.has(line.id))
        .map((line): Line => {
          const problem = setAside.get(line.id);
          if (problem === undefined) return line;
          const { holder: _held, ...aside } = line; // no longer anyone's to send
          return { ...aside, problem };
        });
      this.write(kept);
    });
  }

  /** Send what waits when the timer fires next: after `FLUSH_DELAY_MS` for a confirmation, after the retry
   *  pause (doubled each time) when AgentRein could not be reached. */
  private tryLater(): void {
    if (this.timer !== undefined) return;
    this.schedule(this.retryDelay);
    this.retryDelay = Math.min(this.retryDelay * 2, MAX_RETRY_DELAY_MS);
  }

  private schedule(delayMs: number): void {
    if (this.timer !== undefined) return;
    // Outside any send's context: the timer's flush is a send of its own.
    this.timer = SENDING.exit(() =>
      setTimeout(() => {
        this.timer = undefined;
        this.flush().catch((error: unknown) => {
          // Never thrown into the agent's call: tried again later.
          if (!(error instanceof AgentReinUnavailableError)) this.warn(`AgentRein could not send what ${this.path} holds: ${String(error)}`);
          this.tryLater();
        });
      }, delayMs),
    );
    this.timer.unref(); // nothing waiting keeps the process alive: exit sends or leaves it written down
  }

  /** Whether `line` is this server's and key's, not set aside, and held by no live outbox. */
  private replayable(line: Line): boolean {
    if (line.backend !== this.identity || line.problem !== undefined) return false;
    const holder = line.holder;
    if (holder === undefined) return true;
    return holder.pid === process.pid ? !LIVE_HOLDERS.has(holder.token) : !alive(holder.pid);
  }

  /** The journal's lines. A line that is not JSON (torn by a crash or a full disk in the middle of an
   *  append) is moved to `<journal>.bad` at the next rewrite, and said once, rather than stop every replay. */
  private read(): Line[] {
    if (!existsSync(this.path)) return [];
    const text = readFileSync(this.path, 'utf8');
    if (text.startsWith('SQLite format 3')) {
      throw new ValidationError(JOURNAL_ENV, `${this.path} is the Python SDK's SQLite journal; give this SDK a file of its own`);
    }
    const lines: Line[] = [];
    this.torn = [];
    for (const raw of text.split('\n')) {
      if (!raw.trim()) continue;
      const line = parsed(raw);
      if (line === undefined) this.torn.push(raw);
      else lines.push(line);
    }
    if (this.torn.length && !this.warnedTorn) {
      this.warnedTorn = true;
      process.emitWarning(`${this.path} holds ${this.torn.length} line(s) that are not JSON; they are moved to ${this.path}.bad`, {
        type: 'AgentReinWarning',
      });
    }
    return lines;
  }

  private write(lines: readonly Line[]): void {
    if (this.torn.length) appendFileSync(`${this.path}.bad`, this.torn.map((raw) => `${raw}\n`).join(''));
    this.torn = [];
    replaceFile(this.path, lines.map((l) => `${JSON.stringify(l)}\n`).join(''));
  }
}

/** `raw` as an outbox line, or undefined if it is not JSON (torn). */
function parsed(raw: string): Line | undefined {
  try {
    return JSON.parse(raw) as Line;
  } catch {
    return undefined;
  }
}

/** The entry `line` holds, whichever version wrote it. */
function entryOf(line: Line): Entry {
  return 'kind' in line.entry ? line.entry : fromFormer(line.entry);
}

/** An entry as versions before the outbox wrote it: exactly one of the fields besides `sessionId` set. */
type FormerEntry = { readonly sessionId: string } & (
  | { readonly call: ExecutedCall }
  | { readonly outcome: Omit<OutcomeReported, 'kind' | 'sessionId'> }
  | { readonly opened: Omit<SessionStarted, 'kind' | 'sessionId'> }
  | { readonly completedAt: string }
  | { readonly rollback: Omit<RollbackRequested, 'kind' | 'sessionId'> }
  | { readonly loggingFailure: Omit<LoggingFailed, 'kind' | 'sessionId'> }
);

/** A former entry as the entry it is. */
function fromFormer(entry: FormerEntry): Entry {
  const sessionId = entry.sessionId;
  if ('opened' in entry) return { kind: 'SessionStarted', sessionId, ...entry.opened };
  if ('call' in entry) return { kind: 'CallRecorded', sessionId, call: entry.call };
  if ('outcome' in entry) return { kind: 'OutcomeReported', sessionId, ...entry.outcome };
  if ('completedAt' in entry) return { kind: 'SessionCompleted', sessionId, completedAt: entry.completedAt };
  if ('rollback' in entry) return { kind: 'RollbackRequested', sessionId, ...entry.rollback };
  return { kind: 'LoggingFailed', sessionId, ...entry.loggingFailure };
}

function replaceFile(path: string, text: string): void {
  const temporary = `${path}.${randomBytes(4).toString('hex')}.tmp`;
  writeFileSync(temporary, text);
  renameSync(temporary, path); // atomic: a crash leaves the old file or the new, never half of one
}

/** ``body`` run holding the journal's lock file (see the module's note); a lock whose holder died is taken
 *  over once it is older than any holder keeps it. */
function locked<T>(path: string, body: () => T): T {
  const lock = `${path}.lock`;
  mkdirSync(dirname(path), { recursive: true }); // the state directory, on a machine's first journal
  const deadline = Date.now() + LOCK_WAIT_MS;
  for (;;) {
    try {
      const fd = openSync(lock, 'wx');
      writeSync(fd, String(process.pid));
      closeSync(fd);
      break;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      if (lockAge(lock) > STALE_LOCK_MS) rmSync(lock, { force: true });
      else if (Date.now() > deadline) throw new AgentReinError(`the journal ${path} stayed locked by ${lock}`);
      else Atomics.wait(sleeper, 0, 0, 1); // a holder keeps it for one file write
    }
  }
  try {
    return body();
  } finally {
    rmSync(lock, { force: true });
  }
}

/** Whether process `pid` still runs (on this machine: the journal is a local file). */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM'; // it runs, as another user
  }
}

function lockAge(lock: string): number {
  try {
    return Date.now() - statSync(lock).mtimeMs;
  } catch {
    return 0; // just released: try again
  }
}

/** Send `entry`: where each kind becomes its request. */
async function apply(server: Replayer, entry: Entry): Promise<void> {
  const id = entry.sessionId;
  switch (entry.kind) {
    case 'SessionStarted':
      return void (await server.newSession(entry.agentId, entry.intent, entry.sandbox, id));
    case 'CallRecorded':
      return void (await server.recordExecutedAction(id, entry.call));
    case 'OutcomeReported':
    case 'CallConfirmed': // the PATCH a write-ahead record did not carry
      try {
        await server.sendOutcome(entry);
      } catch (error) {
        // Applied by an earlier replay whose answer was lost, or overtaken (a reviewer decided meanwhile).
        if (!(error instanceof InvalidTransitionError)) throw error;
      }
      return;
    case 'SessionCompleted':
      return void (await server.completeSession(id));
    case 'RollbackRequested':
      return void (await server.requestRollback(id, entry.trigger, entry.approvalTimeoutMs));
    case 'LoggingFailed':
      return void (await server.failSession(id, entry.reason, entry.connector));
  }
}

/** `entry` in words, for a warning. */
function described(entry: Entry): string {
  const session = `of session ${entry.sessionId}`;
  switch (entry.kind) {
    case 'SessionStarted':
      return `the session ${entry.sessionId} opened while it was unreachable`;
    case 'CallRecorded':
      return `the journaled call ${entry.call.apiName} ${session}`;
    case 'OutcomeReported':
      return `the outcome of action ${entry.actionId} ${session}`;
    case 'CallConfirmed':
      return `the confirmation of action ${entry.actionId} ${session}`;
    case 'SessionCompleted':
      return `the completion ${session}`;
    case 'RollbackRequested':
      return `the rollback ${session}`;
    case 'LoggingFailed':
      return `the failed logging ${session}`;
  }
}
