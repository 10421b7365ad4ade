/** What the TypeScript connectors decide that the shared contract does not pin: the github connector's
 *  writes that only Octokit can make (each recorded), the stripe-node versions the stripe connector wraps,
 *  and how the http connector names what fetch sends. Only `prepare` and `accepts` run: nothing is sent. */

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { Octokit } from '@octokit/rest';

import { githubConnector } from '../src/connectors/github.js';
import { httpConnector } from '../src/connectors/http.js';
import { stripeConnector } from '../src/connectors/stripe.js';
import { ValidationError } from '../src/errors.js';

/** An Octokit no request of this file reaches (`prepare` only describes a call). */
const octokit = new Octokit({ baseUrl: 'http://127.0.0.1:9' });

describe('the github connector', () => {
  it('records an octokit.request write to an endpoint the Python connector does not name, as the request it sends', async () => {
    const call = await githubConnector.prepare(octokit, ['request'], ['POST /repos/{owner}/{repo}/labels', { owner: 'acme', repo: 'shop', name: 'bug' }]);
    assert.ok(call !== null);
    assert.equal(call.apiName, 'request POST /repos/{owner}/{repo}/labels');
    assert.equal(call.operationType, 'OTHER');
    assert.deepEqual(githubConnector.undoFor(call, { data: { id: 1 } }), { type: 'none', params: {} });
  });

  it('derives the undo of a call whose issue number or file path is written into the URL', async () => {
    const update = await githubConnector.prepare(octokit, ['request'], ['PATCH /repos/acme/shop/issues/7', { title: 'New' }]);
    assert.ok(update !== null);
    assert.equal(update.apiName, 'issues.update');
    assert.equal(githubConnector.undoFor(update, { data: { number: 7 } }).params['number'], 7);
    const file = await githubConnector.prepare(octokit, ['request'], ['PUT /repos/acme/shop/contents/docs/a.md', { message: 'm', content: 'eA==' }]);
    assert.ok(file !== null);
    assert.equal(file.apiName, 'files.create');
    assert.deepEqual(githubConnector.undoFor(file, { data: {} }).params, { repo: 'acme/shop', path: 'docs/a.md', branch: null });
  });

  it('records a graphql mutation and lets a query through', async () => {
    const mutation = '# star it\nmutation AddStar($id: ID!) { addStar(input: { starrableId: $id }) { clientMutationId } }';
    const call = await githubConnector.prepare(octokit, ['graphql'], [mutation, { id: 'R_1' }]);
    assert.ok(call !== null);
    assert.equal(call.apiName, 'graphql mutation');
    assert.deepEqual(call.payload['id'], 'R_1');
    const query = 'query { viewer { login } } # no mutation here, "mutation" in a string neither';
    assert.equal(await githubConnector.prepare(octokit, ['graphql'], [query]), null);
    assert.equal(await githubConnector.prepare(octokit, ['graphql'], [{ query: '{ viewer { login } }' }]), null);
  });
});

describe('the stripe connector', () => {
  it('refuses a stripe-node older than 22, whose methods do not say where the request options go', () => {
    class Stripe {
      static PACKAGE_VERSION = '21.0.1';
      rawRequest(): void {}
      _requestSender = {};
    }
    assert.throws(() => stripeConnector.accepts(new Stripe()), (error: unknown) => error instanceof ValidationError && /stripe-node 22 or newer, not 21\.0\.1/.test(error.message));
  });
});

describe('the http connector', () => {
  it('names a call as httpx does: its method upper case and its path percent-decoded', async () => {
    const call = await httpConnector.prepare(fetch, [], ['http://127.0.0.1:9/v1/caf%C3%A9/a%20b', { method: 'patch', body: '{}' }]);
    assert.ok(call !== null);
    assert.equal(call.apiName, 'PATCH /v1/café/a b');
    assert.equal(call.operationType, 'UPDATE');
  });
});
