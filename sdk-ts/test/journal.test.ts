/** The journal shared by several processes (agents started in one directory share its default file). */

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { describe, it, type TestContext } from 'node:test';

import { JOURNAL_ENV, Outbox, journalFile, type ExecutedCall, type Replayer } from '../src/outbox.js';

const IDENTITY = 'http://127.0.0.1:9 ar_test';

/** A server that takes every entry, noting the calls' keys in the order they arrive. */
function acceptingServer(received: string[]): Replayer {
  const ok = async () => undefined;
  return {
    newSession: ok,
    recordExecutedAction: async (_session: string, call: ExecutedCall) => {
      received.push(call.idempotencyKey);
    },
    sendOutcome: ok,
    completeSession: ok,
    requestRollback: ok,
    failSession: ok,
  };
}

describe('a journal shared by two processes', () => {
  it("loses no entry the other process appends while this one replays and rewrites it", async (t) => {
    const directory = mkdtempSync(join(tmpdir(), 'agentrein-journal-'));
    t.after(() => rmSync(directory, { recursive: true, force: true }));
    const path = join(directory, 'agentrein-journal.jsonl');
    const count = 1000;
    const journal = new URL('../src/outbox.js', import.meta.url).href;
    const writer = `
      import { Outbox } from ${JSON.stringify(journal)};
      const journal = new Outbox(${JSON.stringify(IDENTITY)}, process.env.JOURNAL);
      for (let i = 0; i < ${count}; i++) {
        journal.append({ kind: 'CallRecorded', sessionId: 'ses_1', call: { idempotencyKey: 'key-' + i, connector: 'http', apiName: 'POST /v1/things',
          operationType: 'CREATE', status: 'SUCCESS', payload: {}, response: null, undo: null, error: null } });
      }
    `;
    const received: string[] = [];
    const server = acceptingServer(received);
    const reader = new Outbox(IDENTITY, path);
    let writing = true;
    const child = new Promise<void>((resolve, reject) => {
      execFile(process.execPath, ['--input-type=module', '-e', writer], { env: { ...process.env, JOURNAL: path } }, (error) => {
        writing = false;
        if (error) reject(error);
        else resolve();
      });
    });
    while (writing) {
      await reader.replay(server); // rewrites the file again and again while the other appends
      await new Promise((resolve) => setImmediate(resolve)); // and lets the other's exit be seen
    }
    await child;
    await reader.replay(server);
    const expected = Array.from({ length: count }, (_, i) => `key-${i}`);
    assert.deepEqual(received, expected); // every entry, once, in the order it was written
    assert.equal(readFileSync(path, 'utf8'), '');
  });
});

/** A temporary state directory (`$XDG_STATE_HOME`, no `$AGENTREIN_JOURNAL`) and working directory in it, for
 *  the test `t`; everything is put back after it. */
function defaultLocation(t: TestContext): string {
  const state = mkdtempSync(join(tmpdir(), 'agentrein-state-'));
  const saved = { journal: process.env[JOURNAL_ENV], state: process.env.XDG_STATE_HOME, cwd: process.cwd() };
  t.after(() => {
    process.chdir(saved.cwd);
    for (const [name, value] of [[JOURNAL_ENV, saved.journal], ['XDG_STATE_HOME', saved.state]] as const) {
      if (value === undefined) delete process.env[name];
      else process.env[name] = value;
    }
    rmSync(state, { recursive: true, force: true });
  });
  delete process.env[JOURNAL_ENV];
  process.env.XDG_STATE_HOME = state;
  process.chdir(mkdtempSync(join(state, 'here-')));
  return state;
}

/** A line of an older version's journal: a call of `backend` with idempotency key `key`. */
function formerLine(backend: string, key: string): string {
  const call = { idempotencyKey: key, connector: 'http', apiName: 'POST /v1/things', operationType: 'CREATE', status: 'SUCCESS',
    payload: {}, response: null, undo: null, error: null };
  return `${JSON.stringify({ id: `id-${key}`, backend, entry: { sessionId: 'ses_1', call } })}\n`;
}

describe('where the journal is kept', () => {
  it("is a file per server and key in the user's state directory, found from any working directory", (t) => {
    const state = defaultLocation(t);
    const journal = new Outbox(IDENTITY);
    journal.append({ kind: 'SessionCompleted', sessionId: 'ses_1', completedAt: '2026-01-01T00:00:00Z' });
    assert.equal(dirname(journal.path), join(state, 'agentrein'));
    assert.ok(existsSync(journal.path) && !journal.path.includes('ar_test'));
    assert.deepEqual(readdirSync(process.cwd()), []); // nothing in the working directory
    process.chdir(state);
    assert.equal(new Outbox(IDENTITY).path, journal.path); // a later process, started elsewhere
    assert.notEqual(journalFile('http://127.0.0.1:9 key other'), journal.path);
  });
});

describe('the journal an older version left in the working directory', () => {
  it('has its server and key\'s lines taken over once, in order, and the other lines left there', async (t) => {
    defaultLocation(t);
    const other = formerLine('http://127.0.0.1:9 key other', 'key-other');
    writeFileSync('agentrein-journal.jsonl', formerLine(IDENTITY, 'key-1') + other + formerLine(IDENTITY, 'key-2'));
    const warnings: string[] = [];
    const listener = (warning: Error) => warnings.push(warning.message);
    process.on('warning', listener);
    t.after(() => process.off('warning', listener));

    const journal = new Outbox(IDENTITY);
    assert.equal(readFileSync('agentrein-journal.jsonl', 'utf8'), other);
    const received: string[] = [];
    assert.equal(await journal.replay(acceptingServer(received)), 2);
    assert.deepEqual(received, ['key-1', 'key-2']);

    new Outbox(IDENTITY); // a later start moves nothing more
    await new Promise((resolve) => setImmediate(resolve)); // warnings are emitted on the next tick
    assert.equal(readFileSync('agentrein-journal.jsonl', 'utf8'), other);
    assert.deepEqual(warnings, [
      `moved 2 journal entries of this server and key from ${join(process.cwd(), 'agentrein-journal.jsonl')} to ${journal.path}`,
    ]);
  });

  it('is deleted once its last line is taken over', (t) => {
    defaultLocation(t);
    writeFileSync('agentrein-journal.jsonl', formerLine(IDENTITY, 'key-1'));
    const journal = new Outbox(IDENTITY);
    assert.deepEqual(readdirSync(process.cwd()), []);
    assert.equal(journal.entries().length, 1);
  });
});

/** A server that notes every entry it is sent, as `what session`, in order. */
function notingServer(received: string[]): Replayer {
  return {
    newSession: async (_agent: string, _intent: string, _sandbox: boolean, sessionId?: string) => received.push(`opened ${sessionId}`),
    recordExecutedAction: async (sessionId: string, call: ExecutedCall) => received.push(`call ${call.idempotencyKey} ${sessionId}`),
    sendOutcome: async (outcome) => received.push(`outcome ${outcome.actionId} ${outcome.sessionId}`),
    completeSession: async (sessionId: string) => received.push(`completed ${sessionId}`),
    requestRollback: async (sessionId: string, trigger: string) => received.push(`rollback ${trigger} ${sessionId}`),
    failSession: async (sessionId: string, reason: string) => received.push(`failed ${reason} ${sessionId}`),
  };
}

describe('the journal the version before the outbox left at its place', () => {
  it('has its lines of every kind read once, sent in order and emptied, and other servers\' lines left', async (t) => {
    const directory = mkdtempSync(join(tmpdir(), 'agentrein-outbox-'));
    t.after(() => rmSync(directory, { recursive: true, force: true }));
    const path = join(directory, 'journal.jsonl');
    const call = { idempotencyKey: 'key-1', connector: 'http', apiName: 'POST /v1/things', operationType: 'CREATE', status: 'SUCCESS',
      payload: {}, response: null, undo: null, error: null };
    const undo = { type: 'http-delete', requireApproval: false, url: 'http://127.0.0.1:9/v1/things/1' };
    const entries = [
      { sessionId: 'ses_new', opened: { agentId: 'billing', intent: 'things', sandbox: false, openedAt: '2026-01-01T00:00:00Z' } },
      { sessionId: 'ses_new', call },
      { sessionId: 'ses_old', outcome: { actionId: 'act_1', succeeded: true, response: { statusCode: 201 }, undo } },
      { sessionId: 'ses_new', completedAt: '2026-01-01T00:01:00Z' },
      { sessionId: 'ses_old', rollback: { trigger: 'rollbackSession()', approvalTimeoutMs: 5000 } },
      { sessionId: 'ses_old', loggingFailure: { reason: 'action logging failed', connector: 'http' } },
    ];
    const other = `${JSON.stringify({ id: 'id-other', backend: 'http://127.0.0.1:9 key other', entry: entries[0] })}\n`;
    const lines = entries.map((entry, n) => `${JSON.stringify({ id: `id-${n}`, backend: IDENTITY, entry })}\n`);
    writeFileSync(path, lines.join('') + other);

    const received: string[] = [];
    assert.equal(await new Outbox(IDENTITY, path).replay(notingServer(received)), 6);
    assert.deepEqual(received, [
      'opened ses_new',
      'call key-1 ses_new',
      'outcome act_1 ses_old',
      'completed ses_new',
      'rollback rollbackSession() ses_old',
      'failed action logging failed ses_old',
    ]);
    assert.equal(readFileSync(path, 'utf8'), other);
    assert.equal(await new Outbox(IDENTITY, path).replay(notingServer(received)), 0); // read once
    assert.equal(received.length, 6);
  });
});
