/** An undo the server hands to this process, slower than its lease: the taker renews the lease while it runs
 *  (`POST /undos/{actionId}/renew`, every third of it), so the undo is reported and the rollback goes on. The
 *  server of this file gives a handed undo a lease of 1.5 s; the undo takes 3 s. */

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

import { unique, useHarness } from './harness.js';

process.env['AGENTREIN_AGENT_UNDO_LEASE_SECONDS'] = '1.5'; // read by the server harness.py starts
const harness = useHarness();
/** `mcp-edge-server.ts`, built beside this file. */
const EDGE_SERVER = fileURLToPath(new URL('./mcp-edge-server.js', import.meta.url));

describe('an undo handed to this process', () => {
  it('is reported once it ran, twice as long as its lease, and the session is rolled back', async () => {
    const agentrein = harness().client();
    const raw = new Client({ name: 'agentrein-tests', version: '1.0.0' });
    await raw.connect(new StdioClientTransport({ command: process.execPath, args: [EDGE_SERVER], stderr: 'ignore' }));
    try {
      const session = await agentrein.newSession({ agentId: unique('lease-agent'), intent: 'Keep notes' });
      const undo = { tools: { create_note: { operation: 'CREATE', undo: { tool: 'forget_note_slowly', arguments: {} } } } };
      const notes = agentrein.wrap(raw, session, { connector: 'mcp', server: 'edge', undo });
      await notes.callTool({ name: 'create_note', arguments: {} });
      const rolledBack = await agentrein.rollbackSession(session);
      assert.equal(rolledBack.status, 'ROLLED_BACK');
      const [action] = (await agentrein.getSession(session)).actions;
      assert.deepEqual([action?.apiName, action?.undoStatus], ['edge.create_note', 'DONE']);
    } finally {
      await raw.close();
      await agentrein.close();
    }
  });
});
