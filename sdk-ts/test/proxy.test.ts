/** The proxy around the real stripe-node and Octokit, against the loopback fakes: their types, classes
 *  and `this` intact, every method seen at its depth with its path. (The stripe and github connectors'
 *  own behaviour is tested with them; a connector that lets everything through stands in here.) */

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { Octokit } from '@octokit/rest';
import Stripe from 'stripe';

import { registerConnector, type Connector } from '../src/index.js';
import { unique, useHarness } from './harness.js';

const harness = useHarness();

/** Lets every call through, and notes the path of each. */
function watching(descend: (value: unknown) => boolean): { connector: Connector; paths: string[] } {
  const paths: string[] = [];
  const connector: Connector = {
    name: unique('watching'),
    sensitiveFields: [],
    undoTypes: [],
    accepts: () => true,
    descend,
    prepare: (_, path) => {
      paths.push(path.join('.'));
      return null;
    },
    recordResult: () => null,
    undoFor: () => ({ type: 'none', params: {} }),
    isTransient: () => false,
  };
  registerConnector(connector);
  return { connector, paths };
}

describe('the proxy around the real SDKs', () => {
  it('keeps a wrapped Stripe a Stripe whose resources work at their depth', async () => {
    const h = harness();
    const port = Number(new URL(h.peers.stripeUrl).port);
    const stripe = new Stripe(h.peers.stripeKey, { host: '127.0.0.1', port, protocol: 'http', maxNetworkRetries: 0 });
    const { connector, paths } = watching((value) => typeof value === 'object' && value !== null && !Array.isArray(value));
    const wrapped = h.client().wrap(stripe, 'ses_proxy', { connector: connector.name });
    assert.ok(wrapped instanceof Stripe);
    const customer: Stripe.Customer = await wrapped.customers.create({ email: 'ada@example.com' });
    assert.equal((await wrapped.customers.retrieve(customer.id)).id, customer.id);
    assert.deepEqual(paths, ['customers.create', 'customers.retrieve']);
  });

  it('keeps a wrapped Octokit an Octokit whose rest and flat methods and paginate work', async () => {
    const h = harness();
    await h.fake('github', 'add_repo', ['octo', 'hello']);
    const octokit = new Octokit({ auth: h.peers.githubToken, baseUrl: h.peers.githubUrl, request: { retries: 0 } });
    const { connector, paths } = watching((value) => typeof value === 'object' && value !== null);
    const gh = h.client().wrap(octokit, 'ses_proxy', { connector: connector.name });
    assert.ok(gh instanceof Octokit);
    const issue = await gh.rest.issues.create({ owner: 'octo', repo: 'hello', title: 'Broken' });
    await gh.issues.createComment({ owner: 'octo', repo: 'hello', issue_number: issue.data.number, body: 'on it' });
    const issues = await gh.paginate(gh.rest.issues.listForRepo, { owner: 'octo', repo: 'hello' });
    assert.deepEqual(issues.map((i) => i.title), ['Broken']);
    assert.deepEqual(paths.slice(0, 3), ['rest.issues.create', 'issues.createComment', 'paginate']);
  });
});
