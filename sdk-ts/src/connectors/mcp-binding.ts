/**
 * One wrapped MCP client as the mcp connector sees it (the twin of `agentrein_mcp.binding`): the client, the
 * name its tools are recorded under, the undo table that applies, what a tool error means, and how to reach
 * the server again once the client is closed. `@modelcontextprotocol/sdk` is an optional peer: this module
 * describes the little of its `Client` it uses, and imports the SDK only to connect again.
 */

import type { Json } from '../connector.js';
import { UndoError, ValidationError } from '../errors.js';
import { builtInFor, combined, loadTable, type UndoTable } from './mcp-tables.js';

export type ToolErrors = 'rollback' | 'record';
/** Where an action's idempotency key travels: MCP has no standard key, so a server that honours one reads it here. */
export const IDEMPOTENCY_META = 'dev.agentrein/idempotency-key';

/** A tool as a server lists it: its title and its (untrusted) annotations. */
export interface McpTool {
  readonly name: string;
  readonly title?: string;
  readonly annotations?: {
    readonly title?: string;
    readonly readOnlyHint?: boolean;
    readonly destructiveHint?: boolean;
    readonly idempotentHint?: boolean;
  };
}

/** A tool's answer: `content` blocks (text among them), `structuredContent`, `isError`. */
export interface McpToolResult {
  readonly content?: readonly { readonly type: string; readonly text?: string }[];
  readonly structuredContent?: { readonly [key: string]: Json };
  readonly isError?: boolean;
}

/** What is used of `@modelcontextprotocol/sdk`'s `Client` (1.32+). */
export interface McpClient {
  callTool(params: { name: string; arguments?: { [key: string]: unknown }; _meta?: { [key: string]: unknown } }, ...rest: unknown[]): Promise<McpToolResult>;
  listTools(params?: { cursor?: string }): Promise<{ tools: readonly McpTool[]; nextCursor?: string }>;
  getServerVersion(): { readonly name: string } | undefined;
  /** Undefined before `connect()` and once closed. */
  readonly transport: unknown;
  close(): Promise<void>;
}

/** How a stdio server was started: the same command, arguments, environment and directory start it again. */
export interface StdioLaunch {
  readonly command: string;
  readonly args?: string[];
  readonly env?: Record<string, string>;
  readonly cwd?: string;
}

export class McpBinding {
  #tools: Map<string, McpTool> | undefined;

  constructor(
    /** The client the agent wrapped; null in a binding made to connect again. */
    readonly client: McpClient | null,
    readonly server: string,
    readonly table: UndoTable,
    readonly onToolError: ToolErrors,
    /** How the wrapped client's server was started (stdio), to connect again; null when it cannot be known. */
    readonly reconnect: StdioLaunch | null,
  ) {}

  /** The tool as the server lists it, listed once per client, again when a name is not in the listing (the
   *  server's tools changed). */
  async tool(name: string): Promise<McpTool | undefined> {
    if (this.#tools === undefined || !this.#tools.has(name)) {
      const tools = new Map<string, McpTool>();
      let cursor: string | undefined;
      do {
        const page = await this.open().listTools(cursor === undefined ? undefined : { cursor });
        for (const tool of page.tools) tools.set(tool.name, tool);
        cursor = page.nextCursor || undefined;
      } while (cursor !== undefined);
      this.#tools = tools;
    }
    return this.#tools.get(name);
  }

  isClosed(): boolean {
    return this.client === null || this.client.transport === undefined;
  }

  /** This binding, to reach its server by connecting again (the client the agent wrapped is closed). */
  reopened(): McpBinding {
    return new McpBinding(null, this.server, this.table, this.onToolError, this.reconnect);
  }

  /** `use(client)` through the wrapped client while it is open, else through a new connection started as the
   *  closed client's was, closed again afterwards. */
  async connected<T>(use: (client: McpClient) => Promise<T>): Promise<T> {
    if (!this.isClosed()) return use(this.client!);
    if (this.reconnect === null) {
      throw new UndoError(
        `the MCP connection to '${this.server}' that made this call is closed, and AgentRein cannot reach that server ` +
          'again: wrap a Client connected over a StdioClientTransport (it knows how to start the server), or roll back while it is open',
      );
    }
    // Imported here alone: an optional peer, present whenever an MCP client was wrapped.
    const [{ Client }, { StdioClientTransport }] = await Promise.all([
      import('@modelcontextprotocol/sdk/client/index.js'),
      import('@modelcontextprotocol/sdk/client/stdio.js'),
    ]);
    const client = new Client({ name: 'agentrein', version: '0.1.0' });
    await client.connect(new StdioClientTransport({ ...this.reconnect, stderr: 'ignore' }));
    try {
      return await use(client as unknown as McpClient);
    } finally {
      await client.close();
    }
  }

  private open(): McpClient {
    if (this.isClosed()) throw new ValidationError('client', `the MCP client of '${this.server}' is closed`);
    return this.client!;
  }
}

/** `client.callTool` with the idempotency key in the request's `_meta`. */
export function callTool(client: McpClient, name: string, args: { readonly [key: string]: unknown }, key: string, rest: readonly unknown[] = [], meta?: unknown): Promise<McpToolResult> {
  const given = typeof meta === 'object' && meta !== null ? (meta as { [key: string]: unknown }) : {};
  return client.callTool({ name, arguments: { ...args }, _meta: { ...given, [IDEMPOTENCY_META]: key } }, ...rest);
}

/** A binding of `client` (a connected `Client`) for the `wrap()` options `server`, `undo` (a table or its
 *  file) and `onToolError`. */
export function bind(client: McpClient, options: { readonly [option: string]: unknown }): McpBinding {
  if (client.transport === undefined) {
    throw new ValidationError('client', 'wrap the MCP client once connected: after `await client.connect(transport)`');
  }
  const info = client.getServerVersion();
  const server = options['server'] ?? info?.name;
  if (typeof server !== 'string' || !server) {
    throw new ValidationError('server', "name the MCP server ({ server: '...' }): it did not name itself");
  }
  const onToolError = options['onToolError'] ?? 'rollback';
  if (onToolError !== 'rollback' && onToolError !== 'record') {
    throw new ValidationError('onToolError', `must be 'rollback' or 'record', not ${JSON.stringify(onToolError)}`);
  }
  const user = options['undo'] === undefined ? undefined : loadTable(options['undo']);
  return new McpBinding(client, server, combined(builtInFor(info?.name), user), onToolError, launchOf(client.transport));
}

/** How a stdio transport started its server, read from the transport (the SDK keeps it, without a public
 *  getter); null for another transport (an in-memory pair, say), which cannot be made again. */
function launchOf(transport: unknown): StdioLaunch | null {
  const params = (transport as { _serverParams?: unknown } | null)?._serverParams;
  if (typeof params !== 'object' || params === null || typeof (params as StdioLaunch).command !== 'string') return null;
  const { command, args, env, cwd } = params as StdioLaunch;
  return { command, ...(args ? { args: [...args] } : {}), ...(env ? { env: { ...env } } : {}), ...(cwd ? { cwd } : {}) };
}
