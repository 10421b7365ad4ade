/** The github connector's writes that have no Python twin to agree with (the shared contract pins the others):
 *  every one is recorded, none passes through unseen. Only `prepare` runs: nothing is sent. */

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { Octokit } from '@octokit/rest';

import { githubConnector } from '../src/connectors/github.js';

/** An Octokit no request of this file reaches (`prepare` only describes a call). */
const octokit = new Octokit({ baseUrl: 'http://127.0.0.1:9' });

describe('the github connector', () => {
  it('records an octokit.request write to an endpoint the Python connector does not name, as the request it sends', () => {
    const call = githubConnector.prepare(octokit, ['request'], ['POST /repos/{owner}/{repo}/labels', { owner: 'acme', repo: 'shop', name: 'bug' }]);
    assert.ok(call !== null);
    assert.equal(call.apiName, 'request POST /repos/{owner}/{repo}/labels');
    assert.equal(call.operationType, 'OTHER');
    assert.deepEqual(githubConnector.undoFor(call, { data: { id: 1 } }), { type: 'none', params: {} });
  });

  it('records a graphql mutation and lets a query through', () => {
    const mutation = '# star it\nmutation AddStar($id: ID!) { addStar(input: { starrableId: $id }) { clientMutationId } }';
    const call = githubConnector.prepare(octokit, ['graphql'], [mutation, { id: 'R_1' }]);
    assert.ok(call !== null);
    assert.equal(call.apiName, 'graphql mutation');
    assert.deepEqual(call.payload['id'], 'R_1');
    const query = 'query { viewer { login } } # no mutation here, "mutation" in a string neither';
    assert.equal(githubConnector.prepare(octokit, ['graphql'], [query]), null);
    assert.equal(githubConnector.prepare(octokit, ['graphql'], [{ query: '{ viewer { login } }' }]), null);
  });
});
