/** The outbox: its one replayer, and its file shared by several processes (agents started in one directory
 *  share its default file). */

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { describe, it, type TestContext } from 'node:test';

import { AgentReinUnavailableError } from '../src/errors.js';
import { JOURNAL_ENV, Outbox, journalFile, type CallConfirmed, type ExecutedCall, type Replayer } from '../src/outbox.js';
import { Served } from '../src/served.js';

const IDENTITY = 'http://127.0.0.1:9 ar_test';

/** A server that cannot be reached. */
const NOWHERE: Replayer = {
  newSession: unreachable,
  recordExecutedAction: unreachable,
  sendOutcome: unreachable,
  completeSession: unreachable,
  requestRollback: unreachable,
  failSession: unreachable,
};

async function unreachable(): Promise<never> {
  throw new AgentReinUnavailableError('nothing answers here');
}

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
      const journal = new Outbox(${JSON.stringify(IDENTITY)}, {}, { path: process.env.JOURNAL }); // it only appends
      for (let i = 0; i < ${count}; i++) {
        journal.append({ kind: 'CallRecorded', sessionId: 'ses_1', call: { idempotencyKey: 'key-' + i, connector: 'http', apiName: 'POST /v1/things',
          operationType: 'CREATE', status: 'SUCCESS', payload: {}, response: null, undo: null, error: null } });
      }
    `;
    const received: string[] = [];
    const server = acceptingServer(received);
    const reader = new Outbox(IDENTITY, server, { path });
    let writing = true;
    const child = new Promise<void>((resolve, reject) => {
      execFile(process.execPath, ['--input-type=module', '-e', writer], { env: { ...process.env, JOURNAL: path } }, (error) => {
        writing = false;
        if (error) reject(error);
        else resolve();
      });
    });
    while (writing) {
      await reader.replay(); // rewrites the file again and again while the other appends
      await new Promise((resolve) => setImmediate(resolve)); // and lets the other's exit be seen
    }
    await child;
    await reader.replay();
    reader.forget();
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
    const journal = new Outbox(IDENTITY, NOWHERE);
    t.after(() => journal.forget());
    journal.append({ kind: 'SessionCompleted', sessionId: 'ses_1', completedAt: '2026-01-01T00:00:00Z' });
    assert.equal(dirname(journal.path), join(state, 'agentrein'));
    assert.ok(existsSync(journal.path) && !journal.path.includes('ar_test'));
    assert.deepEqual(readdirSync(process.cwd()), []); // nothing in the working directory
    process.chdir(state);
    assert.equal(new Outbox(IDENTITY, NOWHERE).path, journal.path); // a later process, started elsewhere
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

    const received: string[] = [];
    const journal = new Outbox(IDENTITY, acceptingServer(received));
    assert.equal(readFileSync('agentrein-journal.jsonl', 'utf8'), other);
    assert.equal(await journal.replay(), 2);
    assert.deepEqual(received, ['key-1', 'key-2']);

    new Outbox(IDENTITY, NOWHERE); // a later start moves nothing more
    await new Promise((resolve) => setImmediate(resolve)); // warnings are emitted on the next tick
    assert.equal(readFileSync('agentrein-journal.jsonl', 'utf8'), other);
    assert.deepEqual(warnings, [
      `moved 2 journal entries of this server and key from ${join(process.cwd(), 'agentrein-journal.jsonl')} to ${journal.path}`,
    ]);
  });

  it('is deleted once its last line is taken over', (t) => {
    defaultLocation(t);
    writeFileSync('agentrein-journal.jsonl', formerLine(IDENTITY, 'key-1'));
    const journal = new Outbox(IDENTITY, NOWHERE);
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
    assert.equal(await new Outbox(IDENTITY, notingServer(received), { path }).replay(), 6);
    assert.deepEqual(received, [
      'opened ses_new',
      'call key-1 ses_new',
      'outcome act_1 ses_old',
      'completed ses_new',
      'rollback rollbackSession() ses_old',
      'failed action logging failed ses_old',
    ]);
    assert.equal(readFileSync(path, 'utf8'), other);
    assert.equal(await new Outbox(IDENTITY, notingServer(received), { path }).replay(), 0); // read once
    assert.equal(received.length, 6);
  });
});

/** A request a loopback stand-in for AgentRein heard. */
interface Heard {
  readonly method: string;
  readonly path: string;
  readonly body: { readonly [field: string]: unknown } | null;
}

/** A stand-in for AgentRein on 127.0.0.1 that notes every request it hears, in order, and takes each (a
 *  write-ahead record is answered as recorded, CLEARED). */
async function loopbackAgentRein(t: TestContext): Promise<{ url: string; heard: Heard[] }> {
  const heard: Heard[] = [];
  const server = createServer((request, response) => {
    let text = '';
    request.setEncoding('utf8');
    request.on('data', (chunk: string) => (text += chunk));
    request.on('end', () => {
      const path = request.url ?? '';
      heard.push({ method: request.method ?? '', path, body: text ? (JSON.parse(text) as Heard['body']) : null });
      const recorded = request.method === 'POST' && /^\/sessions\/[^/]+\/actions$/.test(path);
      const n = heard.length;
      const answer = recorded ? { action: { actionId: `act_${n}`, idempotencyKey: `key_${n}` }, approval: null, refusedConfirmations: [] } : {};
      response.writeHead(recorded ? 201 : 200, { 'Content-Type': 'application/json' });
      response.end(JSON.stringify(answer));
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  t.after(() => {
    server.closeAllConnections();
    server.close();
  });
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, heard };
}

/** The server's operations at `url`, with an outbox in a file of its own for the test `t`. */
function servedAt(t: TestContext, url: string): Served {
  const directory = mkdtempSync(join(tmpdir(), 'agentrein-outbox-'));
  const served = new Served(url, 'ar_test', 10_000, (message) => assert.fail(`warned: ${message}`), join(directory, 'journal.jsonl'));
  t.after(() => {
    served.outbox.forget(); // and its timer
    rmSync(directory, { recursive: true, force: true });
  });
  return served;
}

function confirmed(actionId: string): CallConfirmed {
  return { kind: 'CallConfirmed', sessionId: 'ses_1', actionId, response: { statusCode: 201 }, undo: { type: 'none', requireApproval: false } };
}

function executed(idempotencyKey: string): ExecutedCall {
  return { idempotencyKey, connector: 'http', apiName: 'POST /v1/things', operationType: 'CREATE', status: 'SUCCESS', payload: {}, response: null,
    undo: null, error: null };
}

/** What `heard` heard, a line each: method, path, and the action or idempotency key it is about. */
function requests(heard: readonly Heard[]): string[] {
  return heard.map(({ method, path, body }) => `${method} ${path}${body?.['idempotencyKey'] ? ` ${String(body['idempotencyKey'])}` : ''}`);
}

describe("the outbox's one replayer", () => {
  it('sends confirmations and journal entries interleaved in the order they were written, in one replay', async (t) => {
    const { url, heard } = await loopbackAgentRein(t);
    const served = servedAt(t, url);
    served.confirmAction(confirmed('act_a'));
    served.outbox.append({ kind: 'CallRecorded', sessionId: 'ses_1', call: executed('key-1') });
    served.confirmAction(confirmed('act_b'));
    served.outbox.append({ kind: 'CallRecorded', sessionId: 'ses_1', call: executed('key-2') });
    served.confirmAction(confirmed('act_c'));

    assert.equal(await served.outbox.replay(), 4);
    // Written after the last journaled entry: left to ride with the session's next write-ahead record.
    assert.deepEqual(served.outbox.unsent().map((c) => c.actionId), ['act_c']);
    await served.outbox.flush(); // (or the timer has sent it meanwhile)
    assert.deepEqual(requests(heard), [
      'PATCH /sessions/ses_1/actions/act_a',
      'POST /sessions/ses_1/journal key-1',
      'PATCH /sessions/ses_1/actions/act_b',
      'POST /sessions/ses_1/journal key-2',
      'PATCH /sessions/ses_1/actions/act_c',
    ]);
    assert.equal(readFileSync(served.outbox.path, 'utf8'), '');
  });

  it('does not send a journaled rollback before a confirmation written before it that a record carries', async (t) => {
    const { url, heard } = await loopbackAgentRein(t);
    const served = servedAt(t, url);
    served.confirmAction(confirmed('act_a'));
    const carried = served.outbox.take('ses_1'); // on its way with a write-ahead record
    served.outbox.append({ kind: 'LoggingFailed', sessionId: 'ses_1', reason: 'action logging failed', connector: 'http' });
    const replay = served.outbox.replay();
    await new Promise((resolve) => setTimeout(resolve, 200)); // time enough for a replay that does not wait
    served.outbox.putBack(carried); // the record failed: the confirmation goes in its turn
    await replay;
    assert.deepEqual(requests(heard).slice(0, 2), ['PATCH /sessions/ses_1/actions/act_a', 'POST /sessions/ses_1/fail']);
  });

  it("does not replay again from a replayed entry's own request", { timeout: 30_000 }, async (t) => {
    const { url, heard } = await loopbackAgentRein(t);
    const served = servedAt(t, url);
    // Each is sent by the server's request path, which flushes the outbox first (`Served.call`).
    served.outbox.append({ kind: 'SessionStarted', sessionId: 'ses_1', agentId: 'billing', intent: 'things', sandbox: false, openedAt: '2026-01-01T00:00:00Z' });
    served.outbox.append({ kind: 'CallRecorded', sessionId: 'ses_1', call: executed('key-1') });
    served.outbox.append({ kind: 'SessionCompleted', sessionId: 'ses_1', completedAt: '2026-01-01T00:01:00Z' });

    assert.equal(await served.outbox.replay(), 3);
    assert.deepEqual(requests(heard), ['POST /sessions', 'POST /sessions/ses_1/journal key-1', 'POST /sessions/ses_1/complete']);
  });

  it('sends nothing more than the write-ahead record on the hot path when no journal entry waits', async (t) => {
    const { url, heard } = await loopbackAgentRein(t);
    const served = servedAt(t, url);
    // The file holds what this outbox does not send: another server's entry, and one set aside.
    const aside = { id: 'id-aside', backend: served.identity, entry: { kind: 'CallRecorded', sessionId: 'ses_1', call: executed('key-0') }, problem: 'refused' };
    const other = { id: 'id-other', backend: 'http://127.0.0.1:9 key other', entry: { kind: 'CallRecorded', sessionId: 'ses_9', call: executed('key-9') } };
    writeFileSync(served.outbox.path, `${JSON.stringify(aside)}\n${JSON.stringify(other)}\n`);
    served.confirmAction(confirmed('act_a')); // the last call's success, kept

    assert.equal(await served.outbox.replay(), 0); // what the guard does before the record
    assert.equal(heard.length, 0);
    const record = { connector: 'http', apiName: 'POST /v1/things', operationType: 'CREATE' as const, payload: {}, requiresApproval: false, approvalTimeoutMs: 1000, idempotencyKey: 'agentrein-k1' };
    await served.logAction('ses_1', record);
    assert.deepEqual(requests(heard), ['POST /sessions/ses_1/actions agentrein-k1']); // with the call's key
    assert.deepEqual(heard[0]!.body!['confirm'], [{ actionId: 'act_a', response: { statusCode: 201 }, undo: { type: 'none', requireApproval: false } }]);
  });
});

describe('confirmations carried with a write-ahead record', () => {
  it('keeps aside, with the reason, one the server refused whose success is not on record, and lets a settled one go', (t) => {
    const directory = mkdtempSync(join(tmpdir(), 'agentrein-outbox-'));
    t.after(() => rmSync(directory, { recursive: true, force: true }));
    const path = join(directory, 'journal.jsonl');
    const warnings: string[] = [];
    const outbox = new Outbox(IDENTITY, NOWHERE, { path, warn: (message) => warnings.push(message) });
    t.after(() => outbox.forget());
    outbox.keep(confirmed('act_a'));
    outbox.keep(confirmed('act_b'));
    const carried = outbox.take('ses_1');
    // The answer refused both: act_a is FAILED (not settled), act_b was confirmed already (settled, so left out).
    outbox.delivered(carried, new Map([['act_a', 'action act_a is FAILED; it cannot become SUCCESS']]));
    const lines = readFileSync(path, 'utf8').trim().split('\n').map((line) => JSON.parse(line) as { entry: CallConfirmed; problem?: string });
    assert.deepEqual(lines.map((l) => [l.entry.actionId, l.problem]), [['act_a', 'action act_a is FAILED; it cannot become SUCCESS']]);
    assert.equal(warnings.length, 1);
    assert.match(warnings[0]!, /refused the confirmation of action act_a of session ses_1; kept aside/);
  });
});
