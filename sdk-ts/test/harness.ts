/**
 * The peers of one test file: `harness.py` (the loopback fakes and a real `agentrein serve`) started once,
 * its URLs and keys, and helpers that read and steer the fakes and the server over its control API.
 */

import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { after, before } from 'node:test';
import { fileURLToPath } from 'node:url';

import { AgentRein, type Session } from '../src/index.js';

/** The repository's root: harness.py runs from there (`uv run`). */
const ROOT = resolve(fileURLToPath(import.meta.url), '../../../..');

export interface Peers {
  readonly serverUrl: string;
  readonly operatorKey: string;
  readonly agentKey: string;
  readonly stripeUrl: string;
  readonly stripeKey: string;
  readonly githubUrl: string;
  readonly githubToken: string;
  readonly serviceUrl: string;
  readonly controlUrl: string;
  readonly directory: string;
}

/** The server's database: a temporary SQLite file, or a fresh PostgreSQL database ($AGENTREIN_TEST_POSTGRES_URL). */
export type Database = 'sqlite' | 'postgresql';

/** A request as a fake recorded it (FakeService's `Recorded`). */
export interface Recorded {
  readonly method: string;
  readonly path: string;
  readonly idempotency_key: string | null;
  readonly body: unknown;
  readonly status: number | null;
}

export class Harness {
  private constructor(
    readonly peers: Peers,
    private readonly child: ChildProcess,
  ) {}

  /** Starts harness.py and waits for its line of URLs (it waits for the server to answer first). */
  static async start(database: Database = 'sqlite'): Promise<Harness> {
    const args = ['run', '--quiet', 'python', 'sdk-ts/test/harness.py', ...(database === 'postgresql' ? ['--postgresql'] : [])];
    const child = spawn('uv', args, {
      cwd: ROOT,
      stdio: ['pipe', 'pipe', 'inherit'],
    });
    const killOnExit = () => child.kill('SIGKILL');
    process.once('exit', killOnExit);
    child.once('exit', () => process.removeListener('exit', killOnExit));
    const lines = createInterface({ input: child.stdout! });
    const ready = new Promise<string>((resolveLine, reject) => {
      lines.once('line', resolveLine);
      child.once('exit', (code) => reject(new Error(`harness.py exited (${code}) before it was ready`)));
      child.once('error', (error) => reject(new Error(`harness.py could not start (is uv on the PATH?): ${error.message}`)));
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), 120_000);
    try {
      return new Harness(JSON.parse(await ready) as Peers, child);
    } finally {
      clearTimeout(timer);
    }
  }

  /** Closes harness.py's stdin: it stops the fakes and the server, and exits. */
  async stop(): Promise<void> {
    if (this.child.exitCode !== null) return;
    const exited = once(this.child, 'exit');
    this.child.stdin!.end();
    const timer = setTimeout(() => this.child.kill('SIGKILL'), 30_000);
    await exited;
    clearTimeout(timer);
  }

  /** Calls a public method of a fake (`calls`, `fail_next`, `collection`...) and returns its result. */
  async fake<T = unknown>(name: 'stripe' | 'github' | 'service', method: string, args: unknown[] = [], kwargs: object = {}): Promise<T> {
    return this.control<T>(`/fakes/${name}/${method}`, { args, kwargs });
  }

  /** The requests FakeService received whose path matches `glob`, oldest first. */
  serviceCalls(method: string | null, glob = '*'): Promise<Recorded[]> {
    return this.fake<Recorded[]>('service', 'calls', [method, glob]);
  }

  stopServer(): Promise<void> {
    return this.control('/server/stop', {});
  }

  killServer(): Promise<void> {
    return this.control('/server/kill', {});
  }

  startServer(): Promise<void> {
    return this.control('/server/start', {});
  }

  /** An AgentRein with the operator key (it reviews and adds policies too), journaling in a file of its own. */
  client(options: { journalPath?: string } = {}): AgentRein {
    return new AgentRein({
      baseUrl: this.peers.serverUrl,
      apiKey: this.peers.operatorKey,
      journalPath: options.journalPath ?? this.journalPath(),
    });
  }

  /** A fresh journal file for one test. */
  journalPath(): string {
    return join(mkdtempSync(join(this.peers.directory, 'journal-')), 'agentrein-journal.jsonl');
  }

  private async control<T>(path: string, body: object): Promise<T> {
    const answer = await fetch(`${this.peers.controlUrl}${path}`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify(body),
    });
    const data = (await answer.json()) as T;
    if (!answer.ok) throw new Error(`harness control ${path}: ${JSON.stringify(data)}`);
    return data;
  }
}

/** The harness of the test file that calls it: started before its tests, stopped after them. */
export function useHarness(database: Database = 'sqlite'): () => Harness {
  let harness: Harness | undefined;
  before(async () => {
    harness = await Harness.start(database);
  });
  after(async () => {
    await harness?.stop();
  });
  return () => {
    if (harness === undefined) throw new Error('the harness is not running');
    return harness;
  };
}

/** A name no other test uses (agent ids, so that a policy matches one test's calls alone). */
export function unique(prefix: string): string {
  return `${prefix}-${Math.random().toString(36).slice(2, 10)}`;
}

/** The ids of the session's pending approvals once there are `count`; throws if `call` ends first (it was
 *  never held). */
export async function pendingApprovals(agentrein: AgentRein, session: Session, call: Promise<unknown>, count = 1): Promise<string[]> {
  let ended = false;
  call.then(
    () => (ended = true),
    () => (ended = true),
  );
  for (;;) {
    const pending = (await agentrein.getSession(session)).approvals.filter((a) => a.status === 'PENDING');
    if (pending.length >= count) return pending.map((a) => a.approvalId);
    if (ended) throw new Error('the call ended without being held for approval');
    await new Promise((r) => setTimeout(r, 20));
  }
}
