/**
 * The SDK's local outbox (`agentrein._outbox`): what AgentRein is still to learn, kept in one file until it
 * is sent, as one append-only log of typed entries (`Entry`, tagged by `kind`).
 *
 * What happened while AgentRein could not be reached (`failureMode: 'open'`): a warning says once that calls
 * now run unprotected; every call made meanwhile (`CallRecorded`), every outcome that could not be reported
 * (`OutcomeReported`), a session opened meanwhile (`SessionStarted`, with an id chosen here), its completion
 * (`SessionCompleted`) and the rollbacks that could not be asked for (`RollbackRequested`, `LoggingFailed`)
 * are appended to a file in the user's state directory, one per server and key (`journal-<digest>.jsonl` in
 * `$XDG_STATE_HOME/agentrein` or `~/.local/state/agentrein`, in `~/Library/Application Support/agentrein` on
 * macOS, in `%LOCALAPPDATA%\agentrein` on Windows), where the next process on that server and key finds it
 * wherever it is started; `$AGENTREIN_JOURNAL` overrides. Once AgentRein answers again the entries are
 * replayed in the order they were written (before anything newer is recorded), each deleted once AgentRein
 * has it: a call becomes an action recorded as it happened (deduplicated by its idempotency key), an outcome
 * confirms or fails its action.
 *
 * Confirmations in transit (`CallConfirmed`): a call that succeeded is confirmed with the session's next
 * request, so a wrapped call costs the agent one request to the server (its write-ahead record), not two. The
 * confirmation is kept in memory (`Confirmations`) and the agent's call returns; the session's next
 * write-ahead record carries it (`confirm`), applied first by the server in the same transaction; what no next
 * call carried within `FLUSH_DELAY_MS` is sent on its own (`PATCH`), and so is everything pending before any
 * other request of the client, so what the agent reads next shows its last call's outcome, and a rollback
 * never runs before the earlier successes are confirmed. Each is also written to the file the moment it is
 * kept, as a line *held* by its client, and removed once the server has it: a process killed before it sent
 * its last confirmations (SIGTERM, SIGKILL, a crash) leaves them here, and the next process on this file
 * sends them. A held line is left alone while its holder lives.
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

/** What replaying needs of the server (`served.ts`). */
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

export class Outbox {
  readonly path: string;
  private warned = false;
  private warnedTorn = false;
  /** The lines of the last read that were not JSON, moved aside by the next write. */
  private torn: string[] = [];
  private replaying: Promise<number> | null = null;

  constructor(
    readonly identity: string,
    path?: string,
  ) {
    this.path = journalFile(identity, path);
    if (!path && !process.env[JOURNAL_ENV]) {
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

  append(entry: Entry): void {
    this.add({ id: randomBytes(8).toString('hex'), backend: this.identity, entry });
  }

  /** Write `entry` held by `token` (one client's confirmations, `holding(token)` first); its line's id, for
   *  `release` once the server has it. */
  hold(entry: Entry, token: string): string {
    const id = randomBytes(8).toString('hex');
    this.add({ id, backend: this.identity, entry, holder: { pid: process.pid, token } });
    return id;
  }

  /** The lines `ids` are settled: gone from the journal. */
  release(ids: readonly string[]): void {
    if (!ids.length) return;
    const sent = new Set(ids);
    locked(this.path, () => this.write(this.read().filter((line) => !sent.has(line.id))));
  }

  /** `token` sends what it holds itself from now on, until `letGo(token)`: its lines are not replayed. */
  holding(token: string): void {
    LIVE_HOLDERS.add(token);
  }

  /** What `token` holds is left to the replays (this process's or the next one's). */
  letGo(token: string): void {
    LIVE_HOLDERS.delete(token);
  }

  private add(line: Line): void {
    locked(this.path, () => appendFileSync(this.path, `${JSON.stringify(line)}\n`));
  }

  /** The entries of this server and key waiting to be replayed, in order. */
  entries(): Entry[] {
    return this.read()
      .filter((line) => this.replayable(line))
      .map((line) => entryOf(line));
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
    const sent = new Set<string>();
    const refused = new Map<string, string>();
    for (const line of this.read()) {
      if (!this.replayable(line)) continue;
      try {
        await apply(server, entryOf(line));
        sent.add(line.id);
      } catch (error) {
        if (error instanceof AgentReinError && !(error instanceof AgentReinUnavailableError)) {
          refused.set(line.id, error.message);
          continue;
        }
        break; // still out of reach (or a bug): tried again later, in order
      }
    }
    if (sent.size || refused.size) {
      locked(this.path, () => {
        // The file as it is now: lines other processes (or this one) appended meanwhile are kept.
        const kept = this.read()
          .filter((line) => !sent.has(line.id))
          .map((line) => {
            const problem = refused.get(line.id);
            return problem === undefined ? line : { ...line, problem };
          });
        this.write(kept);
      });
    }
    return sent.size;
  }

  /** Whether `line` is this server's and key's, not set aside, and held by no live process. */
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

async function apply(server: Replayer, entry: Entry): Promise<void> {
  const id = entry.sessionId;
  switch (entry.kind) {
    case 'SessionStarted':
      return void (await server.newSession(entry.agentId, entry.intent, entry.sandbox, id));
    case 'CallRecorded':
      return void (await server.recordExecutedAction(id, entry.call));
    case 'OutcomeReported':
    case 'CallConfirmed': // left by a process that could not send it
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

// confirmations in transit -----------------------------------------------------------------------------

/** How long a confirmation waits for the session's next request before it is sent on its own. */
export const FLUSH_DELAY_MS = 100;
/** The most confirmations one write-ahead record carries (the server's `MAX_CONFIRMATIONS`). */
export const MAX_CONFIRMATIONS = 100;
const RETRY_DELAY_MS = 2000;
const MAX_RETRY_DELAY_MS = 60_000;

/** Where kept confirmations are written until the server has them (the outbox's file). */
export interface ConfirmationStore {
  /** Write `confirmation` down; the id to `release` it by. */
  hold(confirmation: CallConfirmed): string;
  /** These are settled (applied, or refused for good): no longer written down. */
  release(ids: readonly string[]): void;
}

export class Confirmations {
  private pending: CallConfirmed[] = [];
  private store: ConfirmationStore | undefined;
  private readonly written = new Map<CallConfirmed, string>();
  private inFlight = new Set<CallConfirmed>();
  private sending: Promise<void> = Promise.resolve();
  private timer: NodeJS.Timeout | undefined;
  private retryDelay = RETRY_DELAY_MS;

  constructor(
    private readonly send: (confirmation: CallConfirmed) => Promise<void>,
    private readonly warn: (message: string) => void,
  ) {}

  /** Write every confirmation kept from now on to `store` until it is settled. */
  writeTo(store: ConfirmationStore): void {
    this.store = store;
  }

  keep(confirmation: CallConfirmed): void {
    if (this.store !== undefined) this.written.set(confirmation, this.store.hold(confirmation));
    this.pending.push(confirmation);
    this.schedule(FLUSH_DELAY_MS);
  }

  /** The session's pending confirmations, for its next write-ahead record to carry; the caller then reports them
   *  `delivered` or `putBack`. */
  take(sessionId: string): CallConfirmed[] {
    const taken = this.pending.filter((o) => o.sessionId === sessionId).slice(0, MAX_CONFIRMATIONS);
    this.pending = this.pending.filter((o) => !taken.includes(o));
    for (const o of taken) this.inFlight.add(o);
    return taken;
  }

  /** These are applied, or refused for good. */
  delivered(confirmations: readonly CallConfirmed[]): void {
    this.landed(confirmations);
    const ids = confirmations.flatMap((o) => {
      const id = this.written.get(o);
      this.written.delete(o);
      return id === undefined ? [] : [id];
    });
    this.store?.release(ids);
  }

  /** These were not (or may not have been) applied: sent again, before anything kept since. */
  putBack(confirmations: readonly CallConfirmed[]): void {
    this.landed(confirmations);
    this.pending.unshift(...confirmations);
    if (confirmations.length) this.schedule(FLUSH_DELAY_MS);
  }

  /** CallConfirmeds not yet settled. */
  unsent(): CallConfirmed[] {
    return [...this.pending, ...this.inFlight];
  }

  /** Send every pending confirmation, one at a time and in order; throws `AgentReinUnavailableError` (keeping
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

  private landed(confirmations: readonly CallConfirmed[]): void {
    for (const o of confirmations) this.inFlight.delete(o);
  }

  private async sendPending(): Promise<void> {
    while (this.pending.length) {
      const confirmation = this.pending.shift()!;
      this.inFlight.add(confirmation);
      try {
        await this.send(confirmation);
      } catch (error) {
        if (error instanceof AgentReinUnavailableError) {
          this.putBack([confirmation]);
          throw error;
        }
        if (!(error instanceof InvalidTransitionError)) {
          // Refused for good (settled meanwhile is the harmless case above): the action stays CLEARED.
          if (!(error instanceof AgentReinError)) {
            this.putBack([confirmation]);
            throw error;
          }
          this.warn(`AgentRein refused the confirmation of action ${confirmation.actionId}; it stays CLEARED: ${error.message}`);
        }
      }
      this.delivered([confirmation]);
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
