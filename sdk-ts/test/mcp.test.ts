/** The mcp connector through a real AgentRein server (`harness.py`), against the reference memory server
 *  (`@modelcontextprotocol/server-memory`, installed in contract/mcp-servers) over stdio with the official
 *  `Client`: what is recorded, policies and approvals, tool errors, and the undo each call records. */

import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

import { McpToolError, PolicyBlockedError, RollbackFailedError, ValidationError, type AgentRein, type Session, type SessionAction, type WrapOptions } from '../src/index.js';
import { pendingApprovals, unique, useHarness } from './harness.js';

const ROOT = resolve(fileURLToPath(import.meta.url), '../../../..');
const MEMORY_SERVER = join(ROOT, 'contract/mcp-servers/node_modules/@modelcontextprotocol/server-memory/dist/index.js');
/** Calls to the memory server and the undo each must record: the Python connector derives the same. */
const CASES = JSON.parse(readFileSync(join(ROOT, 'contract/mcp-calls.json'), 'utf8')) as {
  readonly cases: readonly {
    readonly name: string;
    readonly calls: readonly { readonly tool: string; readonly arguments: Record<string, unknown>; readonly recorded: Expected | null }[];
  }[];
};
interface Expected {
  readonly apiName: string;
  readonly operationType: string;
  readonly undo: Record<string, unknown>;
}

const harness = useHarness();

/** A memory server over stdio with a knowledge graph of its own (in `file`), and a connected Client. */
async function memoryServer(file = join(mkdtempSync(join(tmpdir(), 'agentrein-memory-')), 'memory.jsonl')): Promise<Client> {
  const client = new Client({ name: 'agentrein-tests', version: '1.0.0' });
  await client.connect(
    new StdioClientTransport({ command: process.execPath, args: [MEMORY_SERVER], env: { MEMORY_FILE_PATH: file }, stderr: 'ignore' }),
  );
  return client;
}

/** A fresh session, a memory server, and the client wrapped with `options` (its calls recorded as `memory.*`
 *  unless they say otherwise); everything closed after `use`. */
async function withMemory(
  options: Omit<WrapOptions, 'connector'>,
  use: (memory: Client, raw: Client, session: Session, agentrein: AgentRein) => Promise<void>,
): Promise<void> {
  const agentrein = harness().client();
  const raw = await memoryServer();
  try {
    const session = await agentrein.newSession({ agentId: unique('mcp-agent'), intent: 'Keep notes' });
    await use(agentrein.wrap(raw, session, { connector: 'mcp', server: 'memory', ...options }), raw, session, agentrein);
  } finally {
    await raw.close();
    await agentrein.close();
  }
}

async function actionsOf(agentrein: AgentRein, session: Session): Promise<SessionAction[]> {
  return (await agentrein.getSession(session)).actions;
}

async function entityNames(raw: Client): Promise<string[]> {
  const graph = (await raw.callTool({ name: 'read_graph', arguments: {} })).structuredContent as { entities: { name: string }[] };
  return graph.entities.map((e) => e.name).sort();
}

const ADA = { name: 'ada', entityType: 'person', observations: ['wrote the first program'] };
const BOB = { name: 'bob', entityType: 'person', observations: ['builds bridges'] };

describe('the mcp connector', () => {
  for (const contractCase of CASES.cases) {
    it(`records each call as the shared contract says: ${contractCase.name}`, async () => {
      await withMemory({}, async (memory, _raw, session, agentrein) => {
        for (const call of contractCase.calls) await memory.callTool({ name: call.tool, arguments: call.arguments });
        const recorded = (await actionsOf(agentrein, session)).map((a) => ({
          apiName: a.apiName,
          operationType: a.operationType,
          undo: a.undo,
        }));
        const expected = contractCase.calls.flatMap((c) => (c.recorded === null ? [] : [c.recorded]));
        assert.deepEqual(recorded, expected);
      });
    });
  }

  it('passes a read-only tool through unrecorded and hands back its result', async () => {
    await withMemory({}, async (memory, _raw, session, agentrein) => {
      await memory.callTool({ name: 'create_entities', arguments: { entities: [ADA] } });
      const found = await memory.callTool({ name: 'search_nodes', arguments: { query: 'ada' } });
      assert.deepEqual((found.structuredContent as { entities: { name: string }[] }).entities.map((e) => e.name), ['ada']);
      assert.deepEqual((await actionsOf(agentrein, session)).map((a) => a.apiName), ['memory.create_entities']);
    });
  });

  it('records the calls under the name the server gives itself when wrap() names none', async () => {
    const agentrein = harness().client();
    const raw = await memoryServer();
    try {
      const session = await agentrein.newSession({ agentId: unique('mcp-agent') });
      const memory = agentrein.wrap(raw, session, { connector: 'mcp' });
      await memory.callTool({ name: 'create_entities', arguments: { entities: [ADA] } });
      const [action] = await actionsOf(agentrein, session);
      assert.equal(action?.apiName, 'memory-server.create_entities');
      assert.equal((action?.undo as { server?: string } | null)?.server, 'memory-server');
    } finally {
      await raw.close();
      await agentrein.close();
    }
  });

  it('stops a call a policy blocks before the MCP server sees it', async () => {
    const agentrein = harness().client();
    const agentId = unique('mcp-blocked');
    await agentrein.addPolicy({ name: unique('no deletes'), effect: 'BLOCK', connector: 'mcp', apiName: 'memory.delete_*', agentId });
    const raw = await memoryServer();
    try {
      const session = await agentrein.newSession({ agentId });
      const memory = agentrein.wrap(raw, session, { connector: 'mcp', server: 'memory' });
      await memory.callTool({ name: 'create_entities', arguments: { entities: [ADA] } });
      await assert.rejects(memory.callTool({ name: 'delete_entities', arguments: { entityNames: ['ada'] } }), PolicyBlockedError);
      assert.deepEqual(await entityNames(raw), ['ada']);
      const statuses = (await actionsOf(agentrein, session)).map((a) => [a.apiName, a.status]);
      assert.deepEqual(statuses, [
        ['memory.create_entities', 'SUCCESS'],
        ['memory.delete_entities', 'FAILED'],
      ]);
    } finally {
      await raw.close();
      await agentrein.close();
    }
  });

  it('holds a call named by its tool alone until a reviewer approves it, then runs it', async () => {
    await withMemory({ requiresApproval: ['delete_*'] }, async (memory, raw, session, agentrein) => {
      await memory.callTool({ name: 'create_entities', arguments: { entities: [ADA, BOB] } });
      const held = memory.callTool({ name: 'delete_entities', arguments: { entityNames: ['bob'] } });
      const [approvalId] = await pendingApprovals(agentrein, session, held);
      assert.deepEqual(await entityNames(raw), ['ada', 'bob']);
      await agentrein.approve(approvalId!, { reviewer: 'tests' });
      await held;
      assert.deepEqual(await entityNames(raw), ['ada']);
      assert.deepEqual((await actionsOf(agentrein, session)).map((a) => a.status), ['SUCCESS', 'SUCCESS']);
    });
  });

  it('fails a call whose tool answers isError, with the result on the error, records it FAILED and rolls the session back', async () => {
    await withMemory({}, async (memory, raw, session, agentrein) => {
      await memory.callTool({ name: 'create_entities', arguments: { entities: [ADA, BOB] } });
      const refused = memory.callTool({ name: 'add_observations', arguments: { observations: [{ entityName: 'nobody', contents: ['x'] }] } });
      const error = await refused.then(
        () => assert.fail('an isError answer was handed back as a success'),
        (e: unknown) => e,
      );
      assert.ok(error instanceof McpToolError);
      assert.equal(error.apiName, 'memory.add_observations');
      assert.equal(error.result.isError, true);
      assert.match(error.message, /nobody/);
      const now = await agentrein.getSession(session);
      assert.deepEqual(
        now.actions.map((a) => [a.apiName, a.status, a.undoStatus]),
        [
          ['memory.create_entities', 'ROLLED_BACK', 'DONE'],
          ['memory.add_observations', 'FAILED', 'NONE'],
        ],
      );
      assert.equal(now.status, 'ROLLED_BACK');
      assert.deepEqual(await entityNames(raw), []);
    });
  });

  it('rolls a session back through the wrapped client: deleted entities and their relations come back', async () => {
    await withMemory({}, async (memory, raw, session, agentrein) => {
      await raw.callTool({ name: 'create_entities', arguments: { entities: [ADA, BOB] } });
      await raw.callTool({ name: 'create_relations', arguments: { relations: [{ from: 'ada', to: 'bob', relationType: 'admires' }] } });
      await memory.callTool({ name: 'delete_entities', arguments: { entityNames: ['bob'] } });
      await memory.callTool({ name: 'create_entities', arguments: { entities: [{ name: 'cy', entityType: 'person', observations: [] }] } });
      const rolledBack = await agentrein.rollbackSession(session);
      assert.equal(rolledBack.status, 'ROLLED_BACK');
      const graph = (await raw.callTool({ name: 'read_graph', arguments: {} })).structuredContent as {
        entities: { name: string; observations: string[] }[];
        relations: unknown[];
      };
      assert.deepEqual(graph.entities.map((e) => [e.name, e.observations]).sort(), [
        ['ada', ['wrote the first program']],
        ['bob', ['builds bridges']],
      ]);
      assert.deepEqual(graph.relations, [{ from: 'ada', to: 'bob', relationType: 'admires' }]);
    });
  });

  it('undoes the calls of a client closed since by starting its server again the same way', async () => {
    const file = join(mkdtempSync(join(tmpdir(), 'agentrein-memory-')), 'memory.jsonl');
    const agentrein = harness().client();
    try {
      const session = await agentrein.newSession({ agentId: unique('mcp-agent') });
      const raw = await memoryServer(file);
      const memory = agentrein.wrap(raw, session, { connector: 'mcp', server: 'memory' });
      await memory.callTool({ name: 'create_entities', arguments: { entities: [ADA] } });
      await raw.close();
      assert.equal((await agentrein.rollbackSession(session)).status, 'ROLLED_BACK');
      const again = await memoryServer(file);
      try {
        assert.deepEqual(await entityNames(again), []);
      } finally {
        await again.close();
      }
    } finally {
      await agentrein.close();
    }
  });

  it('fails the rollback with the reason when the undo tool answers an error', async () => {
    const undo = { tools: { create_entities: { undo: { tool: 'no_such_tool', arguments: { names: 'result.entities[].name' } } } } };
    await withMemory({ undo }, async (memory, _raw, session, agentrein) => {
      await memory.callTool({ name: 'create_entities', arguments: { entities: [ADA] } });
      const error = await agentrein.rollbackSession(session).then(
        () => assert.fail('the rollback succeeded'),
        (e: unknown) => e,
      );
      assert.ok(error instanceof RollbackFailedError);
      assert.equal(error.action.apiName, 'memory.create_entities');
      assert.match(error.message, /memory\.no_such_tool answered an error/);
    });
  });

  it("hands a tool's isError answer back with onToolError 'record', recorded FAILED with no rollback", async () => {
    await withMemory({ onToolError: 'record' }, async (memory, raw, session, agentrein) => {
      await memory.callTool({ name: 'create_entities', arguments: { entities: [ADA] } });
      const answer = await memory.callTool({ name: 'add_observations', arguments: { observations: [{ entityName: 'nobody', contents: ['x'] }] } });
      assert.equal(answer.isError, true);
      const now = await agentrein.getSession(session);
      assert.deepEqual(
        now.actions.map((a) => [a.apiName, a.status]),
        [
          ['memory.create_entities', 'SUCCESS'],
          ['memory.add_observations', 'FAILED'],
        ],
      );
      assert.match(now.actions[1]?.error ?? '', /^McpToolError: memory.add_observations answered an error: .*nobody/);
      assert.equal(now.status, 'ACTIVE');
      assert.deepEqual(await entityNames(raw), ['ada']);
    });
  });

  it("derives the undo from the user's table, which overrides the built-in entry of its tool", async () => {
    const folder = mkdtempSync(join(tmpdir(), 'agentrein-table-'));
    const table = join(folder, 'memory.json');
    writeFileSync(table, JSON.stringify({ tools: { create_entities: { undo: 'none', why: 'kept on purpose' } } }));
    await withMemory({ undo: table }, async (memory, _raw, session, agentrein) => {
      await memory.callTool({ name: 'create_entities', arguments: { entities: [ADA] } });
      await memory.callTool({ name: 'create_relations', arguments: { relations: [{ from: 'ada', to: 'ada', relationType: 'admires' }] } });
      const undos = (await actionsOf(agentrein, session)).map((a) => a.undo);
      assert.deepEqual(undos[0], { type: 'none', requireApproval: false, why: 'kept on purpose' });
      assert.equal(undos[1]?.type, 'mcp-tools');
    });
  });

  it('classifies a tool of a table given as an object, its operation before its name', async () => {
    const undo = { server: 'memory', tools: { create_entities: { operation: 'READ' } } };
    await withMemory({ undo }, async (memory, _raw, session, agentrein) => {
      await memory.callTool({ name: 'create_entities', arguments: { entities: [ADA] } });
      assert.deepEqual(await actionsOf(agentrein, session), []);
    });
  });

  it('refuses an undo table with an unknown key, naming it', async () => {
    await assert.rejects(
      withMemory({ undo: { tools: { create_entities: { undon: 'none' } } } }, async () => assert.fail('wrapped')),
      (error: unknown) => error instanceof ValidationError && error.field === 'undo.tools.create_entities.undon',
    );
  });

  it('refuses an option of another connector', () => {
    const agentrein = harness().client();
    assert.throws(
      () => agentrein.wrap(fetch, 'ses_x', { connector: 'http', server: 'memory' }),
      (error: unknown) => error instanceof ValidationError && error.field === 'server',
    );
  });
});
