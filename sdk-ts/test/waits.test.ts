/** A call held for approval: it says what it waits for, and its wait outlives a server that goes away (killed
 *  or stopped, then started again on the same database and port), on SQLite and on PostgreSQL. */

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { ApprovalTimeoutError } from '../src/index.js';
import { pendingApprovals, unique, useHarness, type Harness } from './harness.js';

function post(api: typeof fetch, url: string, body: object): Promise<Response> {
  return api(url, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
}

async function approve(h: Harness, approvalId: string): Promise<void> {
  const answer = await fetch(`${h.peers.serverUrl}/approvals/${approvalId}/approve`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${h.peers.operatorKey}`, 'Content-Type': 'application/json' },
    body: '{}',
  });
  assert.equal(answer.status, 200, await answer.text());
}

/** What `look` finds once it finds something (looking again every 20 ms for up to 10 s), else its last answer. */
async function eventually<T>(look: () => T[]): Promise<T[]> {
  const deadline = Date.now() + 10_000;
  let found = look();
  while (found.length === 0 && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 20));
    found = look();
  }
  return found;
}

for (const database of ['sqlite', 'postgresql'] as const) {
  const skip = database === 'postgresql' && !process.env['AGENTREIN_TEST_POSTGRES_URL'] ? 'AGENTREIN_TEST_POSTGRES_URL is not set' : false;

  describe(`a call held for approval, its server on ${database}`, { skip }, () => {
    const harness = useHarness(database);

    for (const [how, goesAway] of [
      ['killed (SIGKILL)', (h: Harness) => h.killServer()],
      ['stopped (SIGTERM)', (h: Harness) => h.stopServer()],
    ] as const) {
      it(`outlives its server ${how} and started again, and runs once approved`, async () => {
        const h = harness();
        const agentrein = h.client();
        const session = await agentrein.newSession({ agentId: unique('agent'), intent: 'an order' });
        const path = `/v1/${unique('orders')}`; // a collection of this test's own
        const api = agentrein.wrap(fetch, session, { connector: 'http', requiresApproval: [`POST ${path}`] });
        const call = post(api, `${h.peers.serviceUrl}${path}`, { item: 'desk' });
        const [approvalId] = await pendingApprovals(agentrein, session, call);
        await goesAway(h);
        await h.startServer();
        await approve(h, approvalId!);
        const answer = await call;
        assert.equal(answer.status, 201);
        const order = (await answer.json()) as { id: string };
        const [action] = (await agentrein.getSession(session)).actions; // sends its confirmation first
        assert.equal(action!.status, 'SUCCESS');
        assert.equal((action!.response as { body: { id: string } }).body.id, order.id);
        assert.equal((await h.serviceCalls('POST', path)).length, 1);
        await agentrein.close();
      });
    }

    it('times out with ApprovalTimeoutError when its server stays away past the request\'s time', async () => {
      const h = harness();
      const agentrein = h.client();
      const session = await agentrein.newSession({ agentId: unique('agent'), intent: 'an order' });
      const path = `/v1/${unique('orders')}`;
      const api = agentrein.wrap(fetch, session, { connector: 'http', requiresApproval: [`POST ${path}`], timeoutMs: 10_000 }); // cannot expire before the kill
      const call = post(api, `${h.peers.serviceUrl}${path}`, {});
      await pendingApprovals(agentrein, session, call);
      await h.killServer();
      try {
        await assert.rejects(call, (error: unknown) => {
          assert.ok(error instanceof ApprovalTimeoutError);
          assert.match(error.message, /AgentRein could not be reached until the request's time was up/);
          return true;
        });
      } finally {
        await h.startServer();
      }
      assert.deepEqual(await h.serviceCalls('POST', path), []);
      await agentrein.close();
    });

    it('warns what it waits for and how to decide it, and again when it resumes', async () => {
      const h = harness();
      const agentrein = h.client();
      const session = await agentrein.newSession({ agentId: unique('agent'), intent: 'an order' });
      const held = `POST /v1/${unique('orders')}`;
      const api = agentrein.wrap(fetch, session, { connector: 'http', requiresApproval: [held], timeoutMs: 120_000 });
      const warnings: string[] = [];
      const listen = (warning: Error) => warnings.push(warning.message);
      process.on('warning', listen);
      try {
        const call = post(api, `${h.peers.serviceUrl}${held.slice('POST '.length)}`, { item: 'chair' });
        const [approvalId] = await pendingApprovals(agentrein, session, call);
        const waits = await eventually(() => warnings.filter((w) => w.includes(approvalId!))); // emitted on a later tick
        assert.deepEqual(waits, [
          `AgentRein holds ${held} for approval ${approvalId} (120 s left to decide it): ` +
            `decide it at ${h.peers.serverUrl}/dashboard/approvals#approval-${approvalId}`,
        ]);
        await approve(h, approvalId!);
        assert.equal((await call).status, 201);
        assert.deepEqual(await eventually(() => warnings.filter((w) => w.includes(approvalId!)).slice(1)), [
          `AgentRein approval ${approvalId} is APPROVED: the held ${held} runs now`,
        ]);
      } finally {
        process.off('warning', listen);
        await agentrein.close();
      }
    });
  });
}
