/** The mcp connector through a real AgentRein server (`harness.py`), against the reference memory server
 *  (`@modelcontextprotocol/server-memory`, installed in contract/mcp-servers) over stdio with the official
 *  `Client`: what is recorded, policies and approvals, tool errors, and the undo each call records. */

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdirSync, mkdtempSync, readFileSync, realpathSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { CallToolRequestSchema, ErrorCode, ListToolsRequestSchema, McpError } from '@modelcontextprotocol/sdk/types.js';

import { McpToolError, PolicyBlockedError, RollbackFailedError, ValidationError, type AgentRein, type Session, type SessionAction, type WrapOptions } from '../src/index.js';
import { classify, mcpConnector } from '../src/connectors/mcp.js';
import { parseTable } from '../src/connectors/mcp-tables.js';
import { pendingApprovals, unique, useHarness, type Harness } from './harness.js';

const ROOT = resolve(fileURLToPath(import.meta.url), '../../../..');
const SERVERS = join(ROOT, 'contract/mcp-servers/node_modules/@modelcontextprotocol');
const MEMORY_SERVER = join(SERVERS, 'server-memory/dist/index.js');
const FILESYSTEM_SERVER = join(SERVERS, 'server-filesystem/dist/index.js');
/** `mcp-edge-server.ts`, built beside this file. */
const EDGE_SERVER = fileURLToPath(new URL('./mcp-edge-server.js', import.meta.url));
/** Calls to the reference servers and the undo each must record: the Python connector derives the same. */
const CASES = JSON.parse(readFileSync(join(ROOT, 'contract/mcp-calls.json'), 'utf8')) as {
  readonly cases: readonly {
    readonly name: string;
    readonly server: 'memory' | 'filesystem';
    readonly calls: readonly { readonly tool: string; readonly arguments: Record<string, unknown>; readonly recorded: Expected | null }[];
  }[];
};
interface Expected {
  readonly apiName: string;
  readonly operationType: string;
  /** What the call acts on, in its description ("Create entities ada, bob on memory"). */
  readonly about: readonly string[];
  readonly undo: Record<string, unknown>;
}

const harness = useHarness();

/** A Client connected to a reference server started over stdio with `args` (after node) and `env`. */
async function stdioServer(args: string[], env: Record<string, string> = {}): Promise<Client> {
  const client = new Client({ name: 'agentrein-tests', version: '1.0.0' });
  await client.connect(new StdioClientTransport({ command: process.execPath, args, env, stderr: 'ignore' }));
  return client;
}

/** A memory server with a knowledge graph of its own (in `file`). */
function memoryServer(file = join(folder('memory'), 'memory.jsonl')): Promise<Client> {
  return stdioServer([MEMORY_SERVER], { MEMORY_FILE_PATH: file });
}

/** A new empty folder (its real path, as the filesystem server names it). Its name is kept short: a path segment
 *  of 20 characters or more that looks random is redacted as a credential would be. */
function folder(purpose: string): string {
  return realpathSync(mkdtempSync(join(tmpdir(), `ar-${purpose.slice(0, 3)}-`)));
}

/** A fresh session (on `peers`' server), a reference server (`raw`), and the client wrapped with `options` (its
 *  calls recorded as `memory.*` unless they say otherwise); everything closed after `use`. */
async function withServer(
  options: Omit<WrapOptions, 'connector'>,
  use: (memory: Client, raw: Client, session: Session, agentrein: AgentRein) => Promise<void>,
  server: Promise<Client> = memoryServer(),
  peers: () => Harness = harness,
): Promise<void> {
  const agentrein = peers().client();
  const raw = await server;
  try {
    const session = await agentrein.newSession({ agentId: unique('mcp-agent'), intent: 'Keep notes' });
    await use(agentrein.wrap(raw, session, { connector: 'mcp', server: 'memory', ...options }), raw, session, agentrein);
  } finally {
    await raw.close();
    await agentrein.close();
  }
}

const LEDGER_TABLE = { tools: { add_entry: { undo: { tool: 'remove_entry', arguments: { entry_id: 'result.id' } } } } };

/** A ledger server of the test's own (the SDK's low-level `Server`, in memory), whose `close_entry` answers a
 *  JSON-RPC error, as the reference servers never do (they answer `isError`); and a client connected to it. */
async function ledgerServer(): Promise<{ client: Client; entries: Map<string, string> }> {
  const entries = new Map<string, string>();
  const server = new Server({ name: 'ledger', version: '1.0.0' }, { capabilities: { tools: {} } });
  const schema = { type: 'object' as const, properties: {} };
  server.setRequestHandler(ListToolsRequestSchema, () => ({
    tools: ['add_entry', 'remove_entry', 'close_entry'].map((name) => ({ name, inputSchema: schema })),
  }));
  server.setRequestHandler(CallToolRequestSchema, (request) => {
    const args = (request.params.arguments ?? {}) as { text?: string; entry_id?: string };
    if (request.params.name === 'add_entry') {
      const id = `e${entries.size + 1}`;
      entries.set(id, args.text ?? '');
      return { content: [{ type: 'text', text: id }], structuredContent: { id } };
    }
    if (request.params.name === 'remove_entry') {
      entries.delete(args.entry_id ?? '');
      return { content: [{ type: 'text', text: 'removed' }] };
    }
    throw new McpError(ErrorCode.InvalidParams, `no open entry ${args.entry_id}`);
  });
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  await server.connect(serverSide);
  const client = new Client({ name: 'test', version: '1.0.0' });
  await client.connect(clientSide);
  return { client, entries };
}

/** `value` with `{dir}` in its strings replaced by `dir`. */
function placed<T>(value: T, dir: string): T {
  return JSON.parse(JSON.stringify(value).replaceAll('{dir}', dir)) as T;
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
      const dir = folder(contractCase.server);
      const server = contractCase.server === 'memory' ? memoryServer(join(dir, 'memory.jsonl')) : stdioServer([FILESYSTEM_SERVER, dir]);
      await withServer({ server: contractCase.server }, async (wrapped, _raw, session, agentrein) => {
        const calls = placed(contractCase.calls, dir);
        for (const call of calls) await wrapped.callTool({ name: call.tool, arguments: call.arguments });
        const recorded = (await actionsOf(agentrein, session)).map((a) => ({
          apiName: a.apiName,
          operationType: a.operationType,
          about: a.payload['about'] ?? [],
          undo: a.undo,
        }));
        const expected = calls.flatMap((c) => (c.recorded === null ? [] : [c.recorded]));
        assert.deepEqual(recorded, expected);
      }, server);
    });
  }

  it('passes a read-only tool through unrecorded and hands back its result', async () => {
    await withServer({}, async (memory, _raw, session, agentrein) => {
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
    await withServer({ requiresApproval: ['delete_*'] }, async (memory, raw, session, agentrein) => {
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

  it("sends the action's idempotency key in the request's _meta and records a text answer parsed as JSON", async () => {
    await withServer(
      { server: 'edge' },
      async (edge, _raw, session, agentrein) => {
        await edge.callTool({ name: 'create_note', arguments: {} });
        const [action] = await actionsOf(agentrein, session);
        assert.equal(action?.apiName, 'edge.create_note');
        assert.deepEqual(action?.response, { result: { seen: action?.idempotencyKey } });
        assert.equal(action?.payload['title'], 'Create note');
      },
      stdioServer([EDGE_SERVER]),
    );
  });

  it('lets a tool its server calls read-only through unrecorded, unless the table says what it does', async () => {
    const undo = { tools: { purge_notes: { operation: 'DELETE' } } };
    for (const [options, recorded] of [[{}, []], [{ undo }, ['edge.purge_notes']]] as const) {
      await withServer(
        { server: 'edge', ...options },
        async (edge, _raw, session, agentrein) => {
          await edge.callTool({ name: 'purge_notes', arguments: {} });
          assert.deepEqual((await actionsOf(agentrein, session)).map((a) => a.apiName), recorded);
        },
        stdioServer([EDGE_SERVER]),
      );
    }
  });

  it('records a tool its server calls read-only when its name says it writes', async () => {
    await withServer(
      { server: 'edge' },
      async (edge, _raw, session, agentrein) => {
        await edge.callTool({ name: 'remove_notes', arguments: {} });
        const recorded = (await actionsOf(agentrein, session)).map((a) => [a.apiName, a.operationType]);
        assert.deepEqual(recorded, [['edge.remove_notes', 'DELETE']]);
      },
      stdioServer([EDGE_SERVER]),
    );
  });

  it('retries a retryable call that timed out only when its tool may run twice', async () => {
    await withServer(
      { server: 'edge', retryable: ['*_flag'] },
      async (edge, _raw, session, agentrein) => {
        const answer = await edge.callTool({ name: 'set_flag', arguments: {} }, undefined, { timeout: 2000 });
        assert.deepEqual(answer.content, [{ type: 'text', text: 'flag set' }]);
        await assert.rejects(edge.callTool({ name: 'add_flag', arguments: {} }, undefined, { timeout: 2000 }), /Request timed out/);
        const statuses = (await actionsOf(agentrein, session)).map((a) => [a.apiName, a.status]);
        assert.deepEqual(statuses, [
          ['edge.set_flag', 'SUCCESS'],
          ['edge.add_flag', 'FAILED'],
        ]);
      },
      stdioServer([EDGE_SERVER]),
    );
  });

  it('lets the agent process end while its client waits for undos to take', { timeout: 120_000 }, async () => {
    // An agent that leaves its AgentRein open: the long-poll for handed undos must not keep it alive.
    const agent = `
      import { Client } from '@modelcontextprotocol/sdk/client/index.js';
      import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
      import { AgentRein } from './dist-test/src/index.js';
      const agentrein = new AgentRein({ journalPath: ${JSON.stringify(harness().journalPath())} });
      const session = await agentrein.newSession({ agentId: 'mcp-exits' });
      const raw = new Client({ name: 'agent', version: '1.0.0' });
      await raw.connect(new StdioClientTransport({ command: process.execPath, args: [${JSON.stringify(MEMORY_SERVER)}],
        env: { MEMORY_FILE_PATH: ${JSON.stringify(join(folder('memory'), 'memory.jsonl'))} }, stderr: 'ignore' }));
      const memory = agentrein.wrap(raw, session, { connector: 'mcp', server: 'memory' });
      await memory.callTool({ name: 'create_entities', arguments: { entities: [{ name: 'ada', entityType: 'person', observations: [] }] } });
      await raw.close();
      console.log(session.id);`;
    const { serverUrl, operatorKey } = harness().peers;
    const child = spawn(process.execPath, ['--input-type=module', '-e', agent], {
      cwd: resolve(ROOT, 'sdk-ts'),
      env: { ...process.env, AGENTREIN_URL: serverUrl, AGENTREIN_API_KEY: operatorKey },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let printed = '';
    child.stdout.on('data', (chunk: Buffer) => (printed += chunk.toString()));
    const [code] = (await once(child, 'exit')) as [number | null];
    assert.equal(code, 0);
    const session = await harness().client().getSession(printed.trim());
    assert.deepEqual(
      session.actions.map((a) => [a.apiName, a.status]),
      [['memory.create_entities', 'SUCCESS']],
    );
  });

  it('fails the rollback, saying why, rather than run an undo whose arguments were redacted', async () => {
    const dir = folder('filesystem');
    // A path segment that looks like a token is redacted wherever it is stored, the undo's arguments too.
    const file = join(dir, 'q7Xk2mZp9LwR4tYb8NcV', 'notes.txt');
    mkdirSync(dirname(file));
    writeFileSync(file, 'one');
    await withServer(
      { server: 'filesystem' },
      async (files, _raw, session, agentrein) => {
        await files.callTool({ name: 'write_file', arguments: { path: file, content: 'two' } });
        const error = await agentrein.rollbackSession(session).then(
          () => assert.fail('the rollback succeeded'),
          (e: unknown) => e,
        );
        assert.ok(error instanceof RollbackFailedError);
        assert.match(error.message, /its calls\[0\]\.arguments\.path held a secret/);
        assert.equal(readFileSync(file, 'utf8'), 'two');
      },
      stdioServer([FILESYSTEM_SERVER, dir]),
    );
  });

  it("hands a tool's isError answer back with onToolError 'record', recorded FAILED with no rollback", async () => {
    await withServer({ onToolError: 'record' }, async (memory, raw, session, agentrein) => {
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

  it("records a JSON-RPC error FAILED with onToolError 'record', rolls nothing back, and still throws it", async () => {
    const { client, entries } = await ledgerServer();
    await withServer(
      { server: 'ledger', undo: LEDGER_TABLE, onToolError: 'record' },
      async (ledger, _raw, session, agentrein) => {
        await ledger.callTool({ name: 'add_entry', arguments: { text: 'tea' } });
        await assert.rejects(ledger.callTool({ name: 'close_entry', arguments: { entry_id: 'e9' } }), /no open entry e9/);
        const now = await agentrein.getSession(session);
        assert.deepEqual(
          now.actions.map((a) => [a.apiName, a.status]),
          [
            ['ledger.add_entry', 'SUCCESS'],
            ['ledger.close_entry', 'FAILED'],
          ],
        );
        assert.equal(now.status, 'ACTIVE');
        assert.deepEqual([...entries.keys()], ['e1']); // not undone
      },
      Promise.resolve(client),
    );
  });

  it('rolls the session back on a JSON-RPC error by default', async () => {
    const { client, entries } = await ledgerServer();
    await withServer(
      { server: 'ledger', undo: LEDGER_TABLE },
      async (ledger, _raw, session, agentrein) => {
        await ledger.callTool({ name: 'add_entry', arguments: { text: 'tea' } });
        await assert.rejects(ledger.callTool({ name: 'close_entry', arguments: { entry_id: 'e9' } }), /no open entry e9/);
        assert.equal((await agentrein.getSession(session)).status, 'ROLLED_BACK');
        assert.deepEqual([...entries.keys()], []); // the entry added before it was removed
      },
      Promise.resolve(client),
    );
  });

  it("derives the undo from the user's table, which overrides the built-in entry of its tool", async () => {
    const table = join(folder('table'), 'memory.json');
    writeFileSync(table, JSON.stringify({ tools: { create_entities: { undo: 'none', why: 'kept on purpose' } } }));
    await withServer({ undo: table }, async (memory, _raw, session, agentrein) => {
      await memory.callTool({ name: 'create_entities', arguments: { entities: [ADA] } });
      await memory.callTool({ name: 'create_relations', arguments: { relations: [{ from: 'ada', to: 'ada', relationType: 'admires' }] } });
      const undos = (await actionsOf(agentrein, session)).map((a) => a.undo);
      assert.deepEqual(undos[0], { type: 'none', requireApproval: false, why: 'kept on purpose' });
      assert.equal(undos[1]?.type, 'mcp-tools');
    });
  });

  it("reads the user's table from a YAML file as from a JSON one", async () => {
    const table = join(folder('table'), 'memory.yaml');
    writeFileSync(table, 'tools:\n  create_entities:\n    undo: none\n    why: kept on purpose # as YAML says it\n');
    await withServer({ undo: table }, async (memory, _raw, session, agentrein) => {
      await memory.callTool({ name: 'create_entities', arguments: { entities: [ADA] } });
      const undos = (await actionsOf(agentrein, session)).map((a) => a.undo);
      assert.deepEqual(undos[0], { type: 'none', requireApproval: false, why: 'kept on purpose' });
    });
  });

  it('classifies a tool of a table given as an object, its operation before its name', async () => {
    const undo = { server: 'memory', tools: { create_entities: { operation: 'READ' } } };
    await withServer({ undo }, async (memory, _raw, session, agentrein) => {
      await memory.callTool({ name: 'create_entities', arguments: { entities: [ADA] } });
      assert.deepEqual(await actionsOf(agentrein, session), []);
    });
  });

  it('refuses an undo table with an unknown key, naming it', async () => {
    await assert.rejects(
      withServer({ undo: { tools: { create_entities: { undon: 'none' } } } }, async () => assert.fail('wrapped')),
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

for (const database of ['sqlite', 'postgresql'] as const) {
  const skip = database === 'postgresql' && !process.env['AGENTREIN_TEST_POSTGRES_URL'] ? 'AGENTREIN_TEST_POSTGRES_URL is not set' : false;

  // The undos the server hands back to this process: leased, long-polled, reported (both databases' waits).
  describe(`the mcp connector's undos, run by the agent's process, the server on ${database}`, { skip }, () => {
    const onDatabase = useHarness(database);

    it('fails a call whose tool answers isError, with the result on the error, records it FAILED and rolls the session back', async () => {
      await withServer({}, async (memory, raw, session, agentrein) => {
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
      }, memoryServer(), onDatabase);
    });

    it('rolls a session back through the wrapped client: deleted entities and their relations come back', async () => {
      await withServer({}, async (memory, raw, session, agentrein) => {
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
      }, memoryServer(), onDatabase);
    });

    it('undoes the calls of a client closed since by starting its server again the same way', async () => {
      const file = join(folder('memory'), 'memory.jsonl');
      const agentrein = onDatabase().client();
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
      await withServer({ undo }, async (memory, _raw, session, agentrein) => {
        await memory.callTool({ name: 'create_entities', arguments: { entities: [ADA] } });
        const error = await agentrein.rollbackSession(session).then(
          () => assert.fail('the rollback succeeded'),
          (e: unknown) => e,
        );
        assert.ok(error instanceof RollbackFailedError);
        assert.equal(error.action.apiName, 'memory.create_entities');
        assert.match(error.message, /memory\.no_such_tool answered an error/);
      }, memoryServer(), onDatabase);
    });
  });
}

describe('the mcp connector, before any call', () => {
  it('lets a glob name the tool alone, whatever dots the server name holds', () => {
    const matches = (glob: string, apiName: string) => mcpConnector.globMatches!(glob, apiName);
    assert.deepEqual(
      [matches('delete_*', 'memory.delete_entities'), matches('memory.delete_*', 'memory.delete_entities'), matches('delete_*', 'my.notes.delete_x')],
      [true, true, true],
    );
    assert.equal(matches('delete_*', 'memory.create_entities'), false);
  });

  it('classifies by the table first, then the annotations, then the verb of the name', () => {
    const readOnly = { annotations: { readOnlyHint: true } };
    assert.equal(classify('summarise', undefined, { name: 'summarise', ...readOnly }), 'READ');
    // A server that calls a tool read-only while the table, or its name, says otherwise is recorded.
    const entry = parseTable({ tools: { summarise: { operation: 'UPDATE' } } }).tools.get('summarise');
    assert.equal(classify('summarise', entry, { name: 'summarise', ...readOnly }), 'UPDATE');
    assert.equal(classify('create_entities', undefined, { name: 'create_entities', ...readOnly }), 'CREATE');
    const destructive = { annotations: { destructiveHint: true } };
    assert.equal(classify('reset_cache', undefined, { name: 'reset_cache', ...destructive }), 'UPDATE');
    assert.equal(classify('remove_cache', undefined, { name: 'remove_cache', ...destructive }), 'DELETE');
    assert.equal(classify('frobnicate', undefined, undefined), 'OTHER');
  });

  it('refuses a table whose expression is not JMESPath, naming where it is', () => {
    assert.throws(
      () => parseTable({ tools: { create_x: { undo: { tool: 'delete_x', arguments: { ids: 'result.[' } } } } }),
      (error: unknown) => error instanceof ValidationError && error.field === 'undo.tools.create_x.undo.arguments.ids',
    );
  });

  it('refuses a table file that is not JSON, naming the file', async () => {
    const table = join(folder('table'), 'memory.json');
    writeFileSync(table, '{"tools": ');
    await assert.rejects(
      withServer({ undo: table }, async () => assert.fail('wrapped')),
      (error: unknown) => error instanceof ValidationError && error.field === 'undo' && error.message.includes(table),
    );
  });
});
