/** The wrapped call, step by step, with the http connector (`fetch`) through a real server and FakeService. */

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { promisify } from 'node:util';
import { describe, it, type TestContext } from 'node:test';

import {
  AgentRein,
  AgentReinUnavailableError,
  ApprovalRejectedError,
  ApprovalTimeoutError,
  HttpStatusError,
  PolicyBlockedError,
  ROLLBACK_FAILURE,
  RollbackFailedError,
  type Session,
} from '../src/index.js';
import { Served } from '../src/served.js';
import { pendingApprovals, unique, useHarness, type Harness } from './harness.js';

const harness = useHarness();

/** The harness, a client with the operator key, and a session of an agent of its own. */
async function begun(
  options: { sandbox?: boolean; journalPath?: string } = {},
): Promise<{ h: Harness; agentrein: AgentRein; session: Session }> {
  const h = harness();
  const agentrein = options.journalPath === undefined ? h.client() : h.client({ journalPath: options.journalPath });
  const session = await agentrein.newSession({ agentId: unique('agent'), intent: 'orders', sandbox: options.sandbox ?? false });
  return { h, agentrein, session };
}

/** A session of an agent that made one call to `path` (the http connector) while the server was stopped, so
 *  that it is journaled; the server is started again before this returns, and nothing else is asked of it. */
async function journaledWhileAway(path: string): Promise<{ h: Harness; agentrein: AgentRein; session: Session; journalPath: string }> {
  const journalPath = harness().journalPath();
  const { h, agentrein, session } = await begun({ journalPath });
  const api = agentrein.wrap(fetch, session, { connector: 'http' });
  await h.stopServer();
  try {
    assert.equal((await post(api, `${h.peers.serviceUrl}${path}`, { to: 'a' })).status, 201);
  } finally {
    await h.startServer();
  }
  return { h, agentrein, session, journalPath };
}

/** A proxy on 127.0.0.1 to the server at `target` that loses the answer to the first write-ahead record: the
 *  record reaches the server, which commits it and answers, and the agent's connection is closed before it
 *  hears. `thenAway`: every connection is then refused until `back()`. `heard`: each request, `METHOD /path`. */
async function losingAnswers(
  t: TestContext,
  target: string,
  thenAway: boolean,
): Promise<{ url: string; heard: string[]; back: () => void }> {
  const heard: string[] = [];
  let lost = false;
  let away = false;
  const server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const line = `${request.method} ${request.url}`;
      heard.push(line);
      if (away) return void request.socket.destroy();
      void (async () => {
        const headers = { ...request.headers } as Record<string, string>;
        delete headers['host'];
        delete headers['connection'];
        const body = chunks.length ? { body: Buffer.concat(chunks) } : {};
        const answer = await fetch(`${target}${request.url}`, { method: request.method!, headers, ...body });
        const text = await answer.text();
        if (!lost && /^POST \/sessions\/[^/]+\/actions$/.test(line)) {
          lost = true;
          away = thenAway;
          return void request.socket.destroy();
        }
        response.writeHead(answer.status, { 'Content-Type': answer.headers.get('content-type') ?? 'application/json' });
        response.end(text);
      })();
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  t.after(() => {
    server.closeAllConnections();
    server.close();
  });
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { url, heard, back: () => void (away = false) };
}

function post(api: typeof fetch, url: string, body: object): Promise<Response> {
  return api(url, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
}

describe('the http connector through a server', () => {
  it('records a call write-ahead, CLEARED in the registry before the request goes out', async () => {
    const { h, agentrein, session } = await begun();
    const seenBeforeSending: string[] = [];
    const watched: typeof fetch = async (input, init) => {
      const now = await agentrein.getSession(session);
      seenBeforeSending.push(...now.actions.map((a) => `${a.apiName} ${a.status}`));
      return fetch(input, init);
    };
    const api = agentrein.wrap(watched, session, { connector: 'http' });
    const answer = await post(api, `${h.peers.serviceUrl}/v1/orders`, { item: 'book' });
    assert.equal(answer.status, 201);
    assert.deepEqual(seenBeforeSending, ['POST /v1/orders CLEARED']);
  });

  it('reads a session longer than the page a server shows with every action, in order', async () => {
    const { agentrein, session } = await begun();
    const answered: typeof fetch = async () => Response.json({}, { status: 201 });
    const api = agentrein.wrap(answered, session, { connector: 'http' });
    for (let n = 0; n < 130; n += 1) await post(api, `https://api.test/v1/x/${n}`, {});
    const read = await agentrein.getSession(session);
    assert.deepEqual(read.actions.map((a) => a.seq), Array.from({ length: 130 }, (_, n) => n + 1));
    assert.equal(read.actions.at(-1)!.apiName, 'POST /v1/x/129');
    assert.equal(read.actionCount, 130);
    assert.equal(read.actionsCursor, null);
  });

  it('confirms a call with its response and the undo it derives', async () => {
    const { h, agentrein, session } = await begun();
    const api = agentrein.wrap(fetch, session, { connector: 'http' });
    const order = (await (await post(api, `${h.peers.serviceUrl}/v1/orders`, { item: 'lamp' })).json()) as { id: string };
    const after = await agentrein.getSession(session);
    assert.equal(after.actions.length, 1);
    for (const field of ['id', 'status', 'displayStatus', 'agentId', 'intent', 'sandbox', 'actions']) assert.ok(field in after, field);
    const [action] = after.actions;
    for (const field of ['actionId', 'seq', 'apiName', 'operationType', 'status', 'undoStatus']) assert.ok(field in action!, field);
    assert.equal(action!.status, 'SUCCESS');
    assert.equal(action!.operationType, 'CREATE');
    assert.deepEqual(action!.undo, { type: 'http-delete', requireApproval: false, url: `${h.peers.serviceUrl}/v1/orders/${order.id}` });
    const [sent] = await h.serviceCalls('POST', '/v1/orders');
    assert.ok(sent);
  });

  it("undoes a call as the wrap() undo option says, filling its path from the answer", async () => {
    const { h, agentrein, session } = await begun();
    const api = agentrein.wrap(fetch, session, {
      connector: 'http',
      undo: { 'POST /v1/tickets': { type: 'http-request', method: 'POST', path: '/v1/tickets/{id}/cancel' } },
    });
    const ticket = (await (await post(api, `${h.peers.serviceUrl}/v1/tickets`, { seat: '12A' })).json()) as { id: string };
    const rolled = await agentrein.rollbackSession(session);
    assert.deepEqual(rolled.actions.map((a) => [a.status, a.undoStatus]), [['ROLLED_BACK', 'DONE']]);
    const tickets = await h.fake<Record<string, { status?: string }>>('service', 'collection', ['tickets']);
    assert.equal(tickets[ticket.id]?.status, 'cancelled');
  });

  it('records a call whose undo could not run as one with no undo, never leaving it unconfirmed', async () => {
    const { h, agentrein, session } = await begun();
    const api = agentrein.wrap(fetch, session, { connector: 'http', undo: { 'POST /v1/notes': { type: 'http-delete', url: 'ftp://127.0.0.1/x' } } });
    assert.equal((await post(api, `${h.peers.serviceUrl}/v1/notes`, { text: 'hi' })).status, 201);
    const [action] = (await agentrein.getSession(session)).actions;
    assert.equal(action!.status, 'SUCCESS');
    const rolled = await agentrein.rollbackSession(session).catch((error: unknown) => error);
    assert.ok(!(rolled instanceof Error), String(rolled)); // nothing to undo: skipped, not failed
  });

  it('holds a call that a before-execution REQUIRE_APPROVAL policy matches, as requiresApproval does', async () => {
    const { h, agentrein, session } = await begun();
    const policy = await agentrein.addPolicy({
      name: unique('review-wires'),
      effect: 'REQUIRE_APPROVAL',
      apiName: 'POST /v1/wires',
      agentId: session.agentId,
      beforeExecution: true,
    });
    assert.equal(policy.effect, 'REQUIRE_APPROVAL');
    const api = agentrein.wrap(fetch, session, { connector: 'http' });
    const call = post(api, `${h.peers.serviceUrl}/v1/wires`, { amount: 7 });
    const [approvalId] = await pendingApprovals(agentrein, session, call);
    assert.deepEqual(await h.serviceCalls('POST', '/v1/wires'), []);
    await agentrein.approve(approvalId!, { reviewer: 'ada' });
    assert.equal((await call).status, 201);
  });

  it('confirms the last call when the agent process ends right after it', async () => {
    const { h, agentrein, session } = await begun();
    const sdk = new URL('../src/index.js', import.meta.url).href;
    const agent = `
      import { AgentRein } from ${JSON.stringify(sdk)};
      const agentrein = new AgentRein({ baseUrl: process.env.URL, apiKey: process.env.KEY, journalPath: process.env.JOURNAL });
      const api = agentrein.wrap(fetch, process.env.SESSION, { connector: 'http' });
      await api(process.env.TARGET, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: '{}' });
    `;
    const env = {
      ...process.env,
      URL: h.peers.serverUrl,
      KEY: h.peers.operatorKey,
      JOURNAL: h.journalPath(),
      SESSION: session.id,
      TARGET: `${h.peers.serviceUrl}/v1/lasts`,
    };
    await promisify(execFile)(process.execPath, ['--input-type=module', '-e', agent], { env });
    const [action] = (await agentrein.getSession(session)).actions;
    assert.equal(action!.status, 'SUCCESS');
  });

  it("has the last confirmation of an agent killed right after its call sent by the next process on its journal", async () => {
    const journalPath = harness().journalPath();
    const { h, agentrein, session } = await begun({ journalPath });
    const sdk = new URL('../src/index.js', import.meta.url).href;
    const agent = `
      import { AgentRein } from ${JSON.stringify(sdk)};
      const agentrein = new AgentRein({ baseUrl: process.env.URL, apiKey: process.env.KEY, journalPath: process.env.JOURNAL });
      const api = agentrein.wrap(fetch, process.env.SESSION, { connector: 'http' });
      await api(process.env.TARGET, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: '{}' });
      process.kill(process.pid, 'SIGKILL'); // before its confirmation could be sent: nothing runs at exit
    `;
    const env = { ...process.env, URL: h.peers.serverUrl, KEY: h.peers.operatorKey, JOURNAL: journalPath, SESSION: session.id, TARGET: `${h.peers.serviceUrl}/v1/kills` };
    const killed = await promisify(execFile)(process.execPath, ['--input-type=module', '-e', agent], { env }).then(
      () => null,
      (error: { signal?: string }) => error.signal,
    );
    assert.equal(killed, 'SIGKILL');
    const [action] = (await agentrein.getSession(session)).actions; // this client, on the same journal, sends it
    assert.equal(action!.status, 'SUCCESS');
    assert.equal(readFileSync(journalPath, 'utf8'), '');
  });

  it('never records a read', async () => {
    const { h, agentrein, session } = await begun();
    const api = agentrein.wrap(fetch, session, { connector: 'http' });
    const listed = await api(`${h.peers.serviceUrl}/v1/readings`);
    assert.equal(listed.status, 200);
    assert.deepEqual((await agentrein.getSession(session)).actions, []);
    assert.equal((await h.serviceCalls('GET', '/v1/readings')).length, 1);
  });

  it('throws PolicyBlockedError for a blocked call, which never reaches the service', async () => {
    const { h, agentrein, session } = await begun();
    await agentrein.addPolicy({ name: unique('no-refunds'), effect: 'BLOCK', apiName: 'POST /v1/refunds', agentId: session.agentId });
    const api = agentrein.wrap(fetch, session, { connector: 'http' });
    await assert.rejects(post(api, `${h.peers.serviceUrl}/v1/refunds`, { amount: 5 }), PolicyBlockedError);
    assert.deepEqual(await h.serviceCalls('POST', '/v1/refunds'), []);
    const [action] = (await agentrein.getSession(session)).actions;
    assert.equal(action!.status, 'FAILED');
  });

  it('runs a held call once a reviewer approves it, and not before', async () => {
    const { h, agentrein, session } = await begun();
    const api = agentrein.wrap(fetch, session, { connector: 'http', requiresApproval: ['POST /v1/payouts'] });
    const call = post(api, `${h.peers.serviceUrl}/v1/payouts`, { amount: 100 });
    const [approvalId] = await pendingApprovals(agentrein, session, call);
    assert.deepEqual(await h.serviceCalls('POST', '/v1/payouts'), []);
    await agentrein.approve(approvalId!, { reviewer: 'ada', reason: 'fine' });
    assert.equal((await call).status, 201);
    assert.equal((await h.serviceCalls('POST', '/v1/payouts')).length, 1);
  });

  it('throws ApprovalRejectedError with the reviewer and reason when the approval is rejected', async () => {
    const { h, agentrein, session } = await begun();
    const api = agentrein.wrap(fetch, session, { connector: 'http', requiresApproval: ['POST /v1/transfers'] });
    const call = post(api, `${h.peers.serviceUrl}/v1/transfers`, { amount: 100 });
    const outcome = assert.rejects(call, (error: unknown) => {
      assert.ok(error instanceof ApprovalRejectedError);
      assert.equal(error.reason, 'too much');
      assert.match(error.reviewer ?? '', /^grace\b/); // the server adds which key decided
      return true;
    });
    const [approvalId] = await pendingApprovals(agentrein, session, call);
    await agentrein.reject(approvalId!, { reviewer: 'grace', reason: 'too much' });
    await outcome;
    assert.deepEqual(await h.serviceCalls('POST', '/v1/transfers'), []);
  });

  it('throws ApprovalTimeoutError when nobody decides before the timeout', async () => {
    const { h, agentrein, session } = await begun();
    const api = agentrein.wrap(fetch, session, { connector: 'http', requiresApproval: ['POST /v1/grants'], timeoutMs: 1000 });
    await assert.rejects(post(api, `${h.peers.serviceUrl}/v1/grants`, {}), ApprovalTimeoutError);
    assert.deepEqual(await h.serviceCalls('POST', '/v1/grants'), []);
  });

  it('rolls the session back when a call fails, and rethrows the original error', async () => {
    const { h, agentrein, session } = await begun();
    const api = agentrein.wrap(fetch, session, { connector: 'http' });
    const order = (await (await post(api, `${h.peers.serviceUrl}/v1/baskets`, { item: 'pen' })).json()) as { id: string };
    assert.ok(order.id in (await h.fake<object>('service', 'collection', ['baskets'])));
    await assert.rejects(post(api, `${h.peers.serviceUrl}/v1/baskets/nope/checkout`, {}), (error: unknown) => {
      assert.ok(error instanceof HttpStatusError);
      assert.equal(error.response.status, 404);
      return true;
    });
    assert.deepEqual(await h.fake('service', 'collection', ['baskets']), {});
    const after = await agentrein.getSession(session);
    assert.deepEqual(
      after.actions.map((a) => [a.apiName, a.status]),
      [
        ['POST /v1/baskets', 'ROLLED_BACK'],
        ['POST /v1/baskets/nope/checkout', 'FAILED'],
      ],
    );
  });

  it('retries a retryable call whose answer was lost under the one idempotency key of its action', async () => {
    const { h, agentrein, session } = await begun();
    await h.fake('service', 'fail_next', ['POST', '/v1/invoices', null], { after_effect: true });
    const api = agentrein.wrap(fetch, session, { connector: 'http', retryable: ['POST /v1/*'] });
    assert.equal((await post(api, `${h.peers.serviceUrl}/v1/invoices`, { total: 9 })).status, 201);
    const sent = await h.serviceCalls('POST', '/v1/invoices');
    const [action] = (await agentrein.getSession(session)).actions;
    assert.deepEqual(
      sent.map((r) => r.idempotency_key),
      [action!.idempotencyKey, action!.idempotencyKey],
    );
    assert.equal(Object.keys(await h.fake<object>('service', 'collection', ['invoices'])).length, 1);
  });

  it("throws AgentReinUnavailableError before any request with failureMode 'closed' and the server stopped", async () => {
    const { h, agentrein, session } = await begun();
    const api = agentrein.wrap(fetch, session, { connector: 'http', failureMode: 'closed' });
    await h.stopServer();
    try {
      await assert.rejects(post(api, `${h.peers.serviceUrl}/v1/shipments`, {}), AgentReinUnavailableError);
    } finally {
      await h.startServer();
    }
    assert.deepEqual(await h.serviceCalls('POST', '/v1/shipments'), []);
  });

  it('replays what it journaled while the server was away when it is closed', async () => {
    const { h, agentrein, session, journalPath } = await journaledWhileAway('/v1/postcards');
    await agentrein.close();
    assert.equal(readFileSync(journalPath, 'utf8'), '');
    const [action] = (await h.client().getSession(session)).actions;
    assert.equal(action!.status, 'SUCCESS');
  });

  it("runs calls with failureMode 'open' and the server stopped, journals them, and replays them in order", async () => {
    const journalPath = harness().journalPath();
    const { h, agentrein, session } = await begun({ journalPath });
    const api = agentrein.wrap(fetch, session, { connector: 'http' });
    const warnings: string[] = [];
    const listen = (warning: Error & { code?: string }) => {
      if (warning.code === 'AGENTREIN_UNAVAILABLE') warnings.push(warning.message);
    };
    process.on('warning', listen);
    await h.stopServer();
    try {
      assert.equal((await post(api, `${h.peers.serviceUrl}/v1/letters`, { to: 'a' })).status, 201);
      assert.equal((await post(api, `${h.peers.serviceUrl}/v1/letters`, { to: 'b' })).status, 201);
      assert.equal(readFileSync(journalPath, 'utf8').trim().split('\n').length, 2);
    } finally {
      await h.startServer();
      await new Promise((r) => setImmediate(r)); // warnings are emitted on the next tick
      process.off('warning', listen);
    }
    assert.equal(warnings.length, 1);
    // Replays first (unless the outbox's timer has already sent them).
    assert.equal((await post(api, `${h.peers.serviceUrl}/v1/letters`, { to: 'c' })).status, 201);
    const after = await agentrein.getSession(session);
    assert.deepEqual(
      after.actions.map((a) => [a.apiName, a.status, (a.payload['body'] as { to: string }).to]),
      [
        ['POST /v1/letters', 'SUCCESS', 'a'],
        ['POST /v1/letters', 'SUCCESS', 'b'],
        ['POST /v1/letters', 'SUCCESS', 'c'],
      ],
    );
    assert.equal(readFileSync(journalPath, 'utf8'), '');
    const sent = await h.serviceCalls('POST', '/v1/letters');
    assert.deepEqual(sent.map((r) => r.idempotency_key), after.actions.map((a) => a.idempotencyKey));
  });

  it("asks for a write-ahead record again under the call's key when its answer was lost, and records the call once", async (t) => {
    const h = harness();
    const proxy = await losingAnswers(t, h.peers.serverUrl, false);
    const agentrein = new AgentRein({ baseUrl: proxy.url, apiKey: h.peers.operatorKey, journalPath: h.journalPath() });
    const session = await agentrein.newSession({ agentId: unique('agent'), intent: 'orders' });
    const api = agentrein.wrap(fetch, session, { connector: 'http' });
    assert.equal((await post(api, `${h.peers.serviceUrl}/v1/lost-once`, { to: 'a' })).status, 201);
    assert.equal(proxy.heard.filter((line) => line === `POST /sessions/${session.id}/actions`).length, 2);
    const [sent] = await h.serviceCalls('POST', '/v1/lost-once');
    const after = await agentrein.getSession(session);
    assert.deepEqual(after.actions.map((a) => [a.status, a.idempotencyKey]), [['SUCCESS', sent!.idempotency_key]]);
    await agentrein.close();
  });

  it('settles a write-ahead record whose answer was lost in an outage with the replay of the call it ran', async (t) => {
    const h = harness();
    const proxy = await losingAnswers(t, h.peers.serverUrl, true);
    const agentrein = new AgentRein({ baseUrl: proxy.url, apiKey: h.peers.operatorKey, journalPath: h.journalPath() });
    const session = await agentrein.newSession({ agentId: unique('agent'), intent: 'orders' });
    const api = agentrein.wrap(fetch, session, { connector: 'http' });
    const warned = once(process, 'warning');
    assert.equal((await post(api, `${h.peers.serviceUrl}/v1/lost-away`, { to: 'a' })).status, 201);
    assert.match(String((await warned)[0]), /journaled/);
    proxy.back();
    assert.equal((await post(api, `${h.peers.serviceUrl}/v1/lost-away`, { to: 'b' })).status, 201); // replays first
    const sent = await h.serviceCalls('POST', '/v1/lost-away');
    const after = await agentrein.getSession(session);
    // One record for the first call, not a CLEARED record beside a journaled one.
    assert.deepEqual(
      after.actions.map((a) => [a.status, a.idempotencyKey]),
      sent.map((r) => ['SUCCESS', r.idempotency_key]),
    );
    await agentrein.close();
  });

  it('sends a journaled call to the server once it is back, without any further call of the agent', { timeout: 120_000 }, async () => {
    const { h, session, journalPath } = await journaledWhileAway('/v1/parcels');
    const reader = h.client(); // a journal of its own: its requests send nothing of the agent's
    let actions = (await reader.getSession(session)).actions;
    // The agent's outbox tries again within its retry pause; the server commits the record before the outbox hears the
    // answer and empties its journal, so the test waits for both.
    while (!actions.length || readFileSync(journalPath, 'utf8') !== '') {
      await new Promise((r) => setTimeout(r, 100));
      actions = (await reader.getSession(session)).actions;
    }
    assert.deepEqual(actions.map((a) => [a.apiName, a.status]), [['POST /v1/parcels', 'SUCCESS']]);
  });

  it('keeps a confirmation the server refuses aside in the journal, with the reason, and says so', async () => {
    const { h, session } = await begun();
    const journalPath = h.journalPath();
    const warnings: string[] = [];
    const served = new Served(h.peers.serverUrl, h.peers.operatorKey, 10_000, (message) => warnings.push(message), journalPath);
    served.confirmAction({ kind: 'CallConfirmed', sessionId: session.id, actionId: 'act_unknown', response: {}, undo: { type: 'none', requireApproval: false } });
    try {
      assert.equal(await served.outbox.flush(), 0);
    } finally {
      served.outbox.forget();
    }
    const lines = readFileSync(journalPath, 'utf8').trim().split('\n').map((line) => JSON.parse(line) as { entry: { actionId: string }; problem?: string });
    assert.deepEqual(lines.map((line) => line.entry.actionId), ['act_unknown']);
    assert.match(lines[0]!.problem ?? '', /act_unknown/);
    assert.equal(warnings.length, 1);
    assert.match(warnings[0]!, /refused the confirmation of action act_unknown .*kept aside/);
  });

  it("opens a session with failureMode 'open' while the server is stopped, and creates it with its calls once it is back", async () => {
    const h = harness();
    const agentrein = h.client();
    const api = () => agentrein.wrap(fetch, session, { connector: 'http' });
    await h.stopServer();
    let session: Session;
    try {
      session = await agentrein.newSession({ agentId: unique('offline'), intent: 'while down' });
      assert.equal((await post(api(), `${h.peers.serviceUrl}/v1/notes`, { text: 'kept' })).status, 201);
    } finally {
      await h.startServer();
    }
    const created = await agentrein.getSession(session);
    assert.equal(created.intent, 'while down');
    assert.deepEqual(created.actions.map((a) => [a.apiName, a.status]), [['POST /v1/notes', 'SUCCESS']]);
  });

  it('throws RollbackFailedError, with the session and the action, when an undo fails', async () => {
    const { h, agentrein, session } = await begun();
    // The server sends undos to allowed hosts only (127.0.0.1 here): this one is refused, unsent.
    const api = agentrein.wrap(fetch, session, { connector: 'http', undo: { 'POST /v1/locks': { url: 'http://127.0.0.2:9/v1/locks/1' } } });
    await post(api, `${h.peers.serviceUrl}/v1/locks`, {});
    await assert.rejects(agentrein.rollbackSession(session), (error: unknown) => {
      assert.ok(error instanceof RollbackFailedError);
      assert.equal(error.session.displayStatus, 'ROLLBACK_FAILED');
      assert.equal(error.action.apiName, 'POST /v1/locks');
      return true;
    });
  });

  it('attaches a failed rollback to the error of the call that caused it', async () => {
    const { h, agentrein, session } = await begun();
    const api = agentrein.wrap(fetch, session, { connector: 'http', undo: { 'POST /v1/keys': { url: 'http://127.0.0.2:9/v1/keys/1' } } });
    await post(api, `${h.peers.serviceUrl}/v1/keys`, {});
    await assert.rejects(post(api, `${h.peers.serviceUrl}/v1/keys/none/rotate`, {}), (error: unknown) => {
      assert.ok(error instanceof HttpStatusError);
      const failure = (error as unknown as Record<string, unknown>)[ROLLBACK_FAILURE];
      assert.ok(failure instanceof RollbackFailedError);
      return true;
    });
  });

  it('rolls a sandbox session back without running any inverse', async () => {
    const { h, agentrein, session } = await begun({ sandbox: true });
    assert.equal(session.sandbox, true);
    const api = agentrein.wrap(fetch, session, { connector: 'http' });
    const made = (await (await post(api, `${h.peers.serviceUrl}/v1/drafts`, {})).json()) as { id: string };
    const rolled = await agentrein.rollbackSession(session);
    assert.deepEqual(rolled.actions.map((a) => a.status), ['ROLLED_BACK']);
    assert.ok(made.id in (await h.fake<object>('service', 'collection', ['drafts'])));
    assert.deepEqual(await h.serviceCalls('DELETE', '/v1/drafts/*'), []);
  });

  it('lists every pending approval, following the pages the server links', async () => {
    const { h, agentrein, session } = await begun();
    const api = agentrein.wrap(fetch, session, { connector: 'http', requiresApproval: ['POST /v1/votes'] });
    const calls = Promise.all([1, 2, 3].map((n) => post(api, `${h.peers.serviceUrl}/v1/votes`, { n }).catch((e: unknown) => e)));
    const held = await pendingApprovals(agentrein, session, calls, 3);
    const listed = await agentrein.listApprovals({ status: 'PENDING', limit: 1 }); // one a page
    const mine = listed.filter((a) => a.sessionId === session.id).map((a) => a.approvalId);
    assert.deepEqual(new Set(mine), new Set(held));
    for (const id of mine) await agentrein.reject(id, { reviewer: 'ada', reason: 'no' });
    for (const outcome of await calls) assert.ok(outcome instanceof ApprovalRejectedError);
  });
});
