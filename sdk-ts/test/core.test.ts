/** What the SDK decides on its own, without a server: errors, redaction, options, the proxy. */

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import {
  AgentRein,
  AgentReinError,
  AgentReinUnavailableError,
  ApprovalRejectedError,
  PolicyBlockedError,
  REDACTED,
  Redactor,
  ValidationError,
  registerConnector,
  type Connector,
} from '../src/index.js';
import { fromProblem } from '../src/errors.js';
import { isLoggingFailure } from '../src/guard.js';
import { globMatches } from '../src/glob.js';
import { tooDeep } from '../src/nesting.js';

const problem = (slug: string, fields: object = {}) => ({ type: `https://agentrein.dev/problems/${slug}`, detail: 'as the server said', ...fields });
/** A server no test reaches: the SDK only checks its shape here. */
const NOWHERE = { baseUrl: 'http://127.0.0.1:9', apiKey: 'ar_test' };

describe('errors from the server', () => {
  it("become the named error of their problem type, with the server's detail", () => {
    const error = fromProblem(403, problem('policy-blocked', { policyName: 'no-refunds', actionId: 'act_1' }));
    assert.ok(error instanceof PolicyBlockedError);
    assert.equal(error.name, 'PolicyBlockedError');
    assert.equal(error.message, 'as the server said');
    assert.equal(error.policyName, 'no-refunds');
  });

  it('carry the reviewer\'s reason on a rejection', () => {
    const error = fromProblem(403, problem('approval-rejected', { reason: 'too much' }));
    assert.ok(error instanceof ApprovalRejectedError);
    assert.equal(error.reason, 'too much');
  });

  it('are AgentReinUnavailableError when the server cannot serve now', () => {
    assert.ok(fromProblem(503, null) instanceof AgentReinUnavailableError);
    assert.ok(fromProblem(502, 'not json') instanceof AgentReinUnavailableError);
  });

  it('are a plain AgentReinError, not unavailable, when the server failed', () => {
    const error = fromProblem(500, problem('agentrein-error'));
    assert.ok(error instanceof AgentReinError);
    assert.ok(!(error instanceof AgentReinUnavailableError));
    assert.equal(error.status, 500);
  });

  it('are a ValidationError naming the field for a 4xx of an unknown type', () => {
    const error = fromProblem(400, problem('validation-error', { field: 'payload' }));
    assert.ok(error instanceof ValidationError);
    assert.equal(error.field, 'payload');
  });

  it("roll the session back as the answer's rollsBack says, else as their class does", () => {
    assert.equal(fromProblem(400, problem('validation-error')).rollsBack, true);
    assert.equal(fromProblem(404, problem('not-found')).rollsBack, false);
    assert.equal(fromProblem(404, problem('not-found', { rollsBack: true })).rollsBack, true);
    assert.equal(fromProblem(400, problem('validation-error', { rollsBack: false })).rollsBack, false);
    assert.equal(fromProblem(500, problem('agentrein-error')).rollsBack, true);
  });

  it('that the guard meets while recording a call mean action logging failed when they roll back', () => {
    assert.equal(isLoggingFailure(fromProblem(409, problem('invalid-transition', { rollsBack: false }))), false);
    assert.equal(isLoggingFailure(fromProblem(409, problem('invalid-transition', { rollsBack: true }))), true);
    assert.equal(isLoggingFailure(new TypeError('fetch failed')), true);
  });
});

describe('redaction', () => {
  const redactor = new Redactor(['signature']);

  it('replaces the values of keys naming a secret, by fragment and by whole word', () => {
    const redacted = redactor.redact({ 'X-Api-Key': 'a', client_secret: 'b', 'X-Auth-Key': 'c', spinner: 'd', webhookSignature: 'e' });
    assert.deepEqual(redacted, { 'X-Api-Key': REDACTED, client_secret: REDACTED, 'X-Auth-Key': REDACTED, spinner: 'd', webhookSignature: REDACTED });
  });

  it('keeps the idempotency key, which names no secret', () => {
    assert.deepEqual(redactor.redact({ idempotencyKey: 'k1' }), { idempotencyKey: 'k1' });
  });

  it('replaces card numbers wherever they stand, and only those passing the Luhn check', () => {
    assert.deepEqual(redactor.redact({ note: ['4242 4242 4242 4242', '4242 4242 4242 4241'] }), {
      note: [REDACTED, '4242 4242 4242 4241'],
    });
  });

  it('replaces secrets in free text: key=value pairs and known token shapes', () => {
    assert.equal(redactor.redactText('GET /x?access_token=abc&page=2'), `GET /x?access_token=${REDACTED}&page=2`);
    assert.equal(redactor.redactText(`key sk_live_${'a'.repeat(24)} leaked`), `key ${REDACTED} leaked`);
  });
});

describe('nesting', () => {
  it('finds a payload that holds itself too deep, and a flat one not', () => {
    const cyclic: Record<string, unknown> = { name: 'loop' };
    cyclic['self'] = cyclic;
    assert.ok(tooDeep(cyclic));
    assert.ok(!tooDeep({ a: [{ b: 1 }] }));
  });
});

describe('globs', () => {
  it('match as fnmatchcase does: whole name, case sensitive, sets', () => {
    assert.ok(globMatches('POST /v1/orders', 'POST /v1/*'));
    assert.ok(!globMatches('post /v1/orders', 'POST /v1/*'));
    assert.ok(globMatches('customers.del', 'customers.[d]el'));
    assert.ok(!globMatches('customers.delete', 'customers.del'));
  });
});

describe('options', () => {
  const agentrein = new AgentRein(NOWHERE);

  it("refuse a failureMode that is neither 'open' nor 'closed'", () => {
    assert.throws(() => agentrein.wrap(fetch, 'ses_1', { connector: 'http', failureMode: 'maybe' as 'open' }), ValidationError);
  });

  it('refuse a single string where globs are expected', () => {
    assert.throws(() => agentrein.wrap(fetch, 'ses_1', { connector: 'http', requiresApproval: 'POST *' as unknown as string[] }), ValidationError);
  });

  it("refuse an undo the connector could not run, naming the undo types it has", () => {
    const undo = { 'POST /v1/things': { type: 'stripe-refund' } };
    assert.throws(
      () => agentrein.wrap(fetch, 'ses_1', { connector: 'http', undo }),
      (error: unknown) =>
        error instanceof ValidationError &&
        error.message.includes("undo['POST /v1/things'].type") &&
        error.message.includes('http-delete, http-request, none'),
    );
    agentrein.wrap(fetch, 'ses_1', { connector: 'http', undo: { 'POST /v1/things': { type: 'none' } } }); // taken
  });

  it('refuse an http-request undo without a method, as the http connector of either language does', () => {
    const undo = { 'POST /v1/things': { type: 'http-request', url: 'http://127.0.0.1:9/v1/things/1' } };
    assert.throws(
      () => agentrein.wrap(fetch, 'ses_1', { connector: 'http', undo }),
      (error: unknown) => error instanceof ValidationError && error.field === "undo['POST /v1/things'].method",
    );
  });

  it('name the registered connectors when the one asked for is unknown', () => {
    assert.throws(() => agentrein.wrap(fetch, 'ses_1', { connector: 'nope' }), /registered: .*http/);
  });

  it('refuse a session with no agentId', async () => {
    await assert.rejects(agentrein.newSession({} as { agentId: string }), ValidationError);
  });

  it('refuse a request timeout that is not a whole positive number of milliseconds', () => {
    for (const requestTimeoutMs of [-1, 0, Number.NaN, 1.5, 2 ** 31]) {
      assert.throws(() => new AgentRein({ ...NOWHERE, requestTimeoutMs }), ValidationError, String(requestTimeoutMs));
    }
  });

  it('reject a policy without a name through the promise, as every other call does', async () => {
    const adding = agentrein.addPolicy({} as Parameters<AgentRein['addPolicy']>[0]);
    await assert.rejects(adding, ValidationError);
  });

  it('refuse to start without an API key', () => {
    assert.throws(() => new AgentRein({ baseUrl: 'http://127.0.0.1:9', apiKey: '' }), ValidationError);
  });
});

describe('the proxy', () => {
  class Shop {
    #secret = 'own';
    readonly orders = { shop: this as Shop, list: () => 'listed' };
    create(): string {
      return this.#secret; // throws if called with the proxy as `this`
    }
  }
  const asked: string[] = [];
  const passThrough: Connector = {
    name: unique(),
    sensitiveFields: [],
    undoTypes: [],
    accepts: () => true,
    descend: (value) => typeof value === 'object',
    prepare: (_, path) => {
      asked.push(path.join('.'));
      return null;
    },
    recordResult: () => null,
    undoFor: () => ({ type: 'none', params: {} }),
    isTransient: () => false,
  };
  registerConnector(passThrough);
  const wrapped = new AgentRein(NOWHERE).wrap(new Shop(), 'ses_1', { connector: passThrough.name });

  it("rejects a call its connector cannot describe through the promise, as the raw client does", async () => {
    const wrapped = new AgentRein(NOWHERE).wrap(fetch, 'ses_1', { connector: 'http' });
    const calling = wrapped('not a url', { method: 'POST' }); // no throw here: fetch itself rejects
    await assert.rejects(calling, TypeError);
  });

  it('keeps instanceof', () => {
    assert.ok(wrapped instanceof Shop);
  });

  it('calls class methods with the raw object as this', () => {
    assert.equal(wrapped.create(), 'own');
  });

  it('passes calls the connector lets through, at any depth, and keeps identity', () => {
    assert.equal(wrapped.orders.list(), 'listed');
    assert.equal(wrapped.orders, wrapped.orders);
  });

  it('asks the connector about every method call, with its path from the client', () => {
    asked.length = 0;
    wrapped.orders.list();
    wrapped.create();
    assert.deepEqual(asked, ['orders.list', 'create']);
  });
});

function unique(): string {
  return `test-${Math.random().toString(36).slice(2)}`;
}
