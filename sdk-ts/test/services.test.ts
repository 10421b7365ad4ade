/**
 * The seed's examples as written, with the real stripe-node and Octokit wrapped, through a real server and
 * the loopback fakes: what the server undoes (with the organisation's stored credentials) is what the
 * TypeScript connectors derived, checked at the fakes.
 */

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { Octokit } from '@octokit/rest';
import Stripe from 'stripe';

import { ApprovalRejectedError, ValidationError, type AgentRein, type Session } from '../src/index.js';
import { pendingApprovals, unique, useHarness, type Harness } from './harness.js';

const harness = useHarness();
const OWNER = 'acme';

function stripeOf(h: Harness): Stripe {
  const url = new URL(h.peers.stripeUrl);
  return new Stripe(h.peers.stripeKey, { host: url.hostname, port: Number(url.port), protocol: 'http', maxNetworkRetries: 0 });
}

function octokitOf(h: Harness): Octokit {
  return new Octokit({ auth: h.peers.githubToken, baseUrl: h.peers.githubUrl });
}

async function opened(agentrein: AgentRein, intent: string): Promise<Session> {
  return agentrein.newSession({ agentId: unique('billing-agent'), intent });
}

/** A repository of its own for one test. */
async function repository(h: Harness): Promise<string> {
  const name = unique('shop');
  await h.fake('github', 'add_repo', [OWNER, name]);
  return name;
}

/** An active subscription, made without AgentRein. */
async function activeSubscription(stripe: Stripe): Promise<Stripe.Subscription> {
  const customer = await stripe.customers.create({ email: 'sub@example.com', source: 'tok_visa' });
  const price = await stripe.prices.create({ currency: 'usd', unit_amount: 900, recurring: { interval: 'month' }, product_data: { name: 'Plan' } });
  return stripe.subscriptions.create({ customer: customer.id, items: [{ price: price.id }] });
}

async function stripeObject(h: Harness, id: string): Promise<{ status?: string } | null> {
  return h.fake<{ status?: string } | null>('stripe', 'get', [id]);
}

describe('stripe-node and Octokit wrapped, through a server', () => {
  it('keeps a wrapped Stripe an instance of Stripe and records a customer create with the undo the server runs', async () => {
    const h = harness();
    const agentrein = h.client();
    const session = await opened(agentrein, 'Onboard a customer');
    const agentStripe = agentrein.wrap(stripeOf(h), session, { connector: 'stripe' });
    assert.ok(agentStripe instanceof Stripe);
    const customer: Stripe.Customer = await agentStripe.customers.create({ email: 'user@example.com' });
    const [action] = (await agentrein.getSession(session)).actions;
    assert.deepEqual([action!.apiName, action!.operationType, action!.status], ['customers.create', 'CREATE', 'SUCCESS']);
    assert.deepEqual(action!.undo, { type: 'stripe-delete', requireApproval: false, resource: 'customers', id: customer.id });
    await agentrein.rollbackSession(session);
    assert.equal(await stripeObject(h, customer.id), null, 'the server did not delete the customer');
  });

  it('records the calls of a client made for a connected account with their undo in that account', async () => {
    const h = harness();
    const agentrein = h.client();
    const session = await opened(agentrein, 'Onboard a customer of a connected account');
    const url = new URL(h.peers.stripeUrl);
    const connected = new Stripe(h.peers.stripeKey, {
      host: url.hostname, port: Number(url.port), protocol: 'http', maxNetworkRetries: 0, stripeAccount: 'acct_123',
    });
    const customer = await agentrein.wrap(connected, session, { connector: 'stripe' }).customers.create({ email: 'c@example.com' });
    const [action] = (await agentrein.getSession(session)).actions;
    assert.deepEqual(action!.payload, { params: { email: 'c@example.com' }, options: { stripe_account: 'acct_123' } });
    assert.deepEqual(action!.undo, {
      type: 'stripe-delete', requireApproval: false, resource: 'customers', id: customer.id, stripe_account: 'acct_123',
    });
  });

  it('runs a subscription cancel held for approval once a reviewer approves it', async () => {
    const h = harness();
    const agentrein = h.client();
    const subscription = await activeSubscription(stripeOf(h));
    const session = await opened(agentrein, 'Process monthly invoice batch');
    const agentStripe = agentrein.wrap(stripeOf(h), session, {
      connector: 'stripe',
      requiresApproval: ['subscriptions.cancel', 'customers.del'],
    });
    const cancelled = agentStripe.subscriptions.cancel(subscription.id);
    const approvalId = (await pendingApprovals(agentrein, session, cancelled))[0]!;
    assert.equal((await stripeObject(h, subscription.id))?.status, 'active', 'it ran before the approval');
    await agentrein.approve(approvalId, { reviewer: 'ada', reason: 'customer asked' });
    assert.equal((await cancelled).status, 'canceled');
    assert.equal((await stripeObject(h, subscription.id))?.status, 'canceled');
  });

  it('throws ApprovalRejectedError with the reason when the cancel is rejected, and the subscription stays active', async () => {
    const h = harness();
    const agentrein = h.client();
    const subscription = await activeSubscription(stripeOf(h));
    const session = await opened(agentrein, 'Process monthly invoice batch');
    const agentStripe = agentrein.wrap(stripeOf(h), session, { connector: 'stripe', requiresApproval: ['subscriptions.cancel'] });
    const cancel = agentStripe.subscriptions.cancel(subscription.id);
    const outcome = assert.rejects(cancel, (err: unknown) => {
      assert.ok(err instanceof ApprovalRejectedError);
      assert.equal(err.reason, 'still paying');
      return true;
    });
    await agentrein.reject((await pendingApprovals(agentrein, session, cancel))[0]!, { reviewer: 'grace', reason: 'still paying' });
    await outcome;
    assert.equal((await stripeObject(h, subscription.id))?.status, 'active');
  });

  it('records a GitHub issue and a comment on it, each with the undo the Python connector derives', async () => {
    const h = harness();
    const agentrein = h.client();
    const repo = await repository(h);
    const session = await opened(agentrein, 'Triage a bug');
    const gh = agentrein.wrap(octokitOf(h), session, { connector: 'github' });
    const { data: issue } = await gh.rest.issues.create({ owner: OWNER, repo, title: 'Checkout is slow', body: 'It takes 9 s.' });
    const { data: comment } = await gh.issues.createComment({ owner: OWNER, repo, issue_number: issue.number, body: 'Looking into it' });
    const actions = (await agentrein.getSession(session)).actions;
    assert.deepEqual(
      actions.map((a) => [a.apiName, a.operationType, a.status, a.undo]),
      [
        ['issues.create', 'CREATE', 'SUCCESS', { type: 'github-close-issue', requireApproval: false, repo: `${OWNER}/${repo}`, number: issue.number }],
        ['issues.comments.create', 'CREATE', 'SUCCESS', { type: 'github-delete-comment', requireApproval: false, repo: `${OWNER}/${repo}`, id: comment.id }],
      ],
    );
    assert.equal(comment.body, `Looking into it\n\n<!-- agentrein:${actions[1]!.idempotencyKey} -->`);
  });

  it('rolls back a customer, an issue and its comment, in the server, when a later call fails', async () => {
    const h = harness();
    const agentrein = h.client();
    const repo = await repository(h);
    const session = await opened(agentrein, 'Onboard and open a ticket');
    const agentStripe = agentrein.wrap(stripeOf(h), session, { connector: 'stripe' });
    const gh = agentrein.wrap(octokitOf(h), session, { connector: 'github' });
    const customer = await agentStripe.customers.create({ email: 'ada@example.com' });
    const { data: issue } = await gh.rest.issues.create({ owner: OWNER, repo, title: `Onboard ${customer.id}` });
    await gh.rest.issues.createComment({ owner: OWNER, repo, issue_number: issue.number, body: 'Started' });
    await assert.rejects(agentStripe.customers.update('cus_missing', { name: 'Nobody' }), (err: unknown) => {
      assert.equal((err as { statusCode?: number }).statusCode, 404); // the original error, rethrown
      return true;
    });
    assert.equal(await stripeObject(h, customer.id), null, 'the customer was not deleted');
    const issues = await h.fake<{ number: number; state: string; state_reason: string | null }[]>('github', 'issues', [OWNER, repo]);
    assert.deepEqual(issues.map((i) => [i.number, i.state, i.state_reason]), [[issue.number, 'closed', 'not_planned']]);
    assert.deepEqual(await h.fake('github', 'comments', [OWNER, repo, issue.number]), []);
    const after = await agentrein.getSession(session);
    assert.deepEqual(
      after.actions.map((a) => [a.apiName, a.status]),
      [
        ['customers.create', 'ROLLED_BACK'],
        ['issues.create', 'ROLLED_BACK'],
        ['issues.comments.create', 'ROLLED_BACK'],
        ['customers.update', 'FAILED'],
      ],
    );
  });

  it('retries a Stripe create whose answer was lost under the one idempotency key of its action', async () => {
    const h = harness();
    const agentrein = h.client();
    const session = await opened(agentrein, 'Onboard a customer');
    const email = `${unique('lost')}@example.com`;
    await h.fake('stripe', 'fail_next', ['POST', '/v1/customers', 500], { after_effect: true });
    const agentStripe = agentrein.wrap(stripeOf(h), session, { connector: 'stripe', retryable: ['customers.create'] });
    const customer = await agentStripe.customers.create({ email });
    const [action] = (await agentrein.getSession(session)).actions;
    const sent = (await h.fake<{ path: string; idempotency_key: string | null; status: number | null }[]>('stripe', 'calls')).filter(
      (c) => c.idempotency_key === action!.idempotencyKey,
    );
    assert.deepEqual(sent.map((c) => [c.path, c.status]), [['/v1/customers', 500], ['/v1/customers', 200]]);
    const made = (await h.fake<{ id: string; email: string }[]>('stripe', 'objects', ['customer'])).filter((c) => c.email === email);
    assert.deepEqual(made.map((c) => c.id), [customer.id]);
  });

  it('retries a GitHub issue create whose answer was lost by finding the issue the lost attempt made', async () => {
    const h = harness();
    const agentrein = h.client();
    const repo = await repository(h);
    const session = await opened(agentrein, 'Triage a bug');
    await h.fake('github', 'fail_next', ['POST', `/repos/${OWNER}/${repo}/issues`, 502], { after_effect: true });
    const gh = agentrein.wrap(octokitOf(h), session, { connector: 'github', retryable: ['issues.create'] });
    const { data: issue } = await gh.rest.issues.create({ owner: OWNER, repo, title: 'Checkout is slow' });
    const issues = await h.fake<{ number: number }[]>('github', 'issues', [OWNER, repo]);
    assert.deepEqual(issues.map((i) => i.number), [issue.number]);
  });

  it('restores what a Stripe update changed as it was before its first attempt, when a retry follows a lost answer', async () => {
    const h = harness();
    const agentrein = h.client();
    const customer = await stripeOf(h).customers.create({ email: 'old@example.com' });
    const session = await opened(agentrein, 'Fix a customer');
    await h.fake('stripe', 'fail_next', ['POST', `/v1/customers/${customer.id}`, 500], { after_effect: true });
    const agentStripe = agentrein.wrap(stripeOf(h), session, { connector: 'stripe', retryable: ['customers.update'] });
    assert.equal((await agentStripe.customers.update(customer.id, { email: 'new@example.com' })).email, 'new@example.com');
    const [action] = (await agentrein.getSession(session)).actions;
    assert.deepEqual(action!.undo, {
      type: 'stripe-restore',
      requireApproval: false,
      resource: 'customers',
      id: customer.id,
      params: { email: 'old@example.com' },
    });
    await agentrein.rollbackSession(session);
    assert.equal((await h.fake<{ email: string }>('stripe', 'get', [customer.id])).email, 'old@example.com');
  });

  it('answers a retried ref create told it exists with the ref the lost attempt made, and the server deletes it', async () => {
    const h = harness();
    const agentrein = h.client();
    const repo = await repository(h);
    const { data: main } = await octokitOf(h).rest.repos.getBranch({ owner: OWNER, repo, branch: 'main' });
    const session = await opened(agentrein, 'Start a fix');
    await h.fake('github', 'fail_next', ['POST', `/repos/${OWNER}/${repo}/git/refs`, 502], { after_effect: true });
    const gh = agentrein.wrap(octokitOf(h), session, { connector: 'github', retryable: ['git.refs.create'] });
    const { data: ref } = await gh.rest.git.createRef({ owner: OWNER, repo, ref: 'refs/heads/fix', sha: main.commit.sha });
    assert.equal(ref.ref, 'refs/heads/fix');
    const [action] = (await agentrein.getSession(session)).actions;
    assert.deepEqual(action!.undo, { type: 'github-delete-ref', requireApproval: false, repo: `${OWNER}/${repo}`, ref: 'refs/heads/fix' });
    await agentrein.rollbackSession(session);
    assert.ok(!('refs/heads/fix' in (await h.fake<object>('github', 'refs', [OWNER, repo]))));
  });

  it('refuses to wrap an Octokit with the retry plugin, which would make an issue twice after a lost answer', async () => {
    const h = harness();
    const agentrein = h.client();
    const session = await opened(agentrein, 'Triage a bug');
    // What @octokit/plugin-retry adds to an Octokit (enabled or not): `octokit.retry.retryRequest`.
    const Retrying = Octokit.plugin(() => ({ retry: { retryRequest: (error: unknown) => error } }));
    const retrying = new Retrying({ auth: h.peers.githubToken, baseUrl: h.peers.githubUrl });
    assert.throws(() => agentrein.wrap(retrying, session, { connector: 'github' }), (err: unknown) => {
      assert.ok(err instanceof ValidationError);
      assert.match(err.message, /plugin-retry/);
      return true;
    });
  });
});
