/** Each AgentRein finds connectors by name in a registry of its own: the built-in ones, those registered
 *  on it, and those of the deprecated module-level `registerConnector`; never another client's. */

import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';

import { AgentRein, ValidationError, registerConnector, type Connector } from '../src/index.js';

/** A server no test reaches: `wrap()` asks nothing of it. */
const NOWHERE = { baseUrl: 'http://127.0.0.1:9', apiKey: 'ar_test', journalPath: join(mkdtempSync(join(tmpdir(), 'agentrein-registry-')), 'journal.jsonl') };

/** A shop whose `orders.list()` is a read any connector here lets through. */
const shop = () => ({ orders: { list: () => 'listed' } });

/** Lets every call through, noting `name: path` of each, so a test sees which connector a client used. */
function noting(name: string, seen: string[]): Connector {
  return {
    name,
    sensitiveFields: [],
    undoTypes: [],
    accepts: () => true,
    descend: (value) => typeof value === 'object' && value !== null,
    prepare: (_, path) => {
      seen.push(`${name}: ${path.join('.')}`);
      return null;
    },
    recordResult: () => null,
    undoFor: () => ({ type: 'none', params: {} }),
    isTransient: () => false,
  };
}

describe('the connectors of a client', () => {
  it('are not seen by another client of the same process', () => {
    const seen: string[] = [];
    const first = new AgentRein(NOWHERE);
    const second = new AgentRein(NOWHERE);
    first.registerConnector(noting('shop', seen));
    assert.equal(first.wrap(shop(), 'ses_1', { connector: 'shop' }).orders.list(), 'listed');
    assert.deepEqual(seen, ['shop: orders.list']);
    assert.throws(
      () => second.wrap(shop(), 'ses_2', { connector: 'shop' }),
      (error: unknown) =>
        error instanceof ValidationError && /no connector named 'shop' is registered \(registered: .*github, http, mcp, stripe/.test(error.message),
    );
  });

  it('may be given to the constructor', () => {
    const seen: string[] = [];
    const agentrein = new AgentRein({ ...NOWHERE, connectors: [noting('shop', seen)] });
    agentrein.wrap(shop(), 'ses_1', { connector: 'shop' }).orders.list();
    assert.deepEqual(seen, ['shop: orders.list']);
  });

  it('replace a built-in connector of the same name for that client alone', () => {
    const seen: string[] = [];
    const own = new AgentRein({ ...NOWHERE, connectors: [noting('stripe', seen)] });
    own.wrap(shop(), 'ses_1', { connector: 'stripe' }).orders.list();
    assert.deepEqual(seen, ['stripe: orders.list']);
    assert.throws(
      () => new AgentRein(NOWHERE).wrap(shop(), 'ses_2', { connector: 'stripe' }),
      /the 'stripe' connector cannot wrap this client/,
    );
  });

  it('include those registered with the deprecated module-level registerConnector, after their own', () => {
    const seen: string[] = [];
    const earlier = new AgentRein(NOWHERE);
    registerConnector(noting('registry-test-everywhere', seen));
    earlier.wrap(shop(), 'ses_1', { connector: 'registry-test-everywhere' }).orders.list();
    const ownSeen: string[] = [];
    const own = new AgentRein({ ...NOWHERE, connectors: [noting('registry-test-everywhere', ownSeen)] });
    own.wrap(shop(), 'ses_2', { connector: 'registry-test-everywhere' }).orders.list();
    assert.deepEqual([seen, ownSeen], [['registry-test-everywhere: orders.list'], ['registry-test-everywhere: orders.list']]);
  });

  it('must each have a name', () => {
    assert.throws(() => new AgentRein({ ...NOWHERE, connectors: [{ ...noting('x', []), name: '' }] }), /a connector needs a name/);
    assert.throws(() => new AgentRein({ ...NOWHERE, connectors: 'shop' as never }), /must be a list of connectors/);
  });
});
