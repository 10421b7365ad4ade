/**
 * The mcp connector for `@modelcontextprotocol/sdk`'s `Client` (the twin of `agentrein_mcp.connector`; the same
 * rules, so a session recorded from TypeScript reads and rolls back as one recorded from Python):
 *
 * - `callTool({ name, arguments })` is one action, api name `<server>.<tool>` (`server` in `wrap()`, else the
 *   name the server gives itself); every other method (`listTools`, resources, prompts) passes through. A glob
 *   of `requiresApproval`/`retryable` may name the tool alone (`delete_*`).
 * - Classified by the undo table's entry, then the tool's annotations (`readOnlyHint`: a read, unrecorded;
 *   `destructiveHint`: a delete or an update), then the verb of its name, else OTHER. Annotations come from the
 *   server, which is not trusted: they classify, and a read-only hint on a tool whose name says it writes is not
 *   believed (a read would pass every policy unrecorded).
 * - A result with `isError` fails the call (`McpToolError`; the session rolls back), unless `onToolError:
 *   'record'`. The recorded response is `structuredContent`, else the text (parsed if JSON).
 * - The action's idempotency key travels in `_meta` (`dev.agentrein/idempotency-key`); a call is retried only
 *   when the tool is annotated `idempotentHint` or the table says `idempotent`.
 * - Undo comes from the server's table (`mcp-tables.ts`). The server cannot reach an agent's stdio server, so
 *   it hands the undo to this process (`undos.ts`), which runs it here (`runUndo`) through the wrapped client
 *   while it is open, else through a new connection started as it was (`mcp-binding.ts`).
 */

import { operationByVerb, type Connector, type Json, type PreparedCall, type UndoConfig } from '../connector.js';
import { UndoError, ValidationError } from '../errors.js';
import { globMatches } from '../glob.js';
import { UNDO_NONE } from '../undo.js';
import { bind, callTool, McpBinding, type McpClient, type McpTool, type McpToolResult } from './mcp-binding.js';
import { falsy, type ToolCall, type ToolEntry, type ToolOperation } from './mcp-tables.js';

export const MCP_TOOLS = 'mcp-tools';
/** The JSON-RPC codes of `@modelcontextprotocol/sdk`'s `ErrorCode` worth sending the same call again for: the
 *  connection closed, the request timed out. */
const TRANSIENT_CODES = new Set([-32000, -32001]);

/** A guarded tool call answered `isError`: the call failed, and the session was rolled back (see
 *  `agentreinRollbackFailure` on it for a rollback that failed too). `result` is the server's answer. */
export class McpToolError extends Error {
  constructor(
    readonly apiName: string,
    readonly result: McpToolResult,
  ) {
    super(`${apiName} answered an error: ${textOf(result) || 'no reason given'}`);
    this.name = 'McpToolError';
  }
}

/** What `undoFor` needs of a call: its table entry, its arguments, and the `before` read's result. */
interface ToolCallContext {
  readonly binding: McpBinding;
  readonly entry: ToolEntry | undefined;
  readonly arguments: { readonly [key: string]: Json };
  before: Json;
}

type Params = { name?: unknown; arguments?: unknown; _meta?: unknown };

export const mcpConnector: Connector = {
  name: 'mcp',
  sensitiveFields: [],
  undoTypes: [MCP_TOOLS],
  wrapOptions: ['server', 'undo', 'onToolError'],

  accepts(client: unknown): boolean {
    const c = client as Partial<Record<keyof McpClient, unknown>> | null;
    return typeof c === 'object' && c !== null && [c.callTool, c.listTools, c.getServerVersion].every((m) => typeof m === 'function');
  },

  bind(client: unknown, options: { readonly [option: string]: unknown }): McpBinding {
    return bind(client as McpClient, options);
  },

  descend(): boolean {
    return false; // a Client's methods are its own: nothing below it to guard
  },

  globMatches(glob: string, apiName: string): boolean {
    if (globMatches(apiName, glob)) return true;
    // the tool alone: what follows the server's name (which may hold dots itself)
    return [...apiName].some((c, i) => c === '.' && globMatches(apiName.slice(i + 1), glob));
  },

  prepare(client: unknown, path: readonly string[], args: readonly unknown[]): Promise<PreparedCall | null> | null {
    if (path.length !== 1 || path[0] !== 'callTool') return null;
    const params = (args[0] ?? {}) as Params;
    if (typeof params !== 'object' || typeof params.name !== 'string') {
      throw new ValidationError('name', "the tool's name must be a string");
    }
    const given = params.arguments ?? {};
    if (typeof given !== 'object' || given === null || Array.isArray(given)) {
      throw new ValidationError('arguments', "a tool's arguments are an object");
    }
    return prepared(client as McpBinding, params.name, given as { [key: string]: Json }, params._meta, args.slice(1));
  },

  failureIn(call: PreparedCall, result: unknown): string | null {
    const answer = result as McpToolResult;
    // With onToolError 'rollback', an error was thrown as McpToolError instead.
    return answer.isError ? `McpToolError: ${call.apiName} answered an error: ${textOf(answer) || 'no reason given'}` : null;
  },

  recordResult(_call: PreparedCall, result: unknown): Json {
    const answer = result as McpToolResult;
    return { result: recordedResult(answer), ...(answer.isError ? { isError: true } : {}) };
  },

  undoFor(call: PreparedCall, result: unknown): UndoConfig {
    const context = call.context as ToolCallContext;
    const { entry } = context;
    const server = context.binding.server;
    const requireApproval = entry?.requireApproval ?? false;
    if (entry?.undo === undefined) {
      const why = "its server's undo table has no entry for it, and an MCP tool has no inverse of its own";
      return { type: UNDO_NONE, params: { why: entry?.why ?? why } };
    }
    if (!entry.undo.length) return { type: UNDO_NONE, params: { why: entry.why ?? "its server's undo table says it has no undo" } };
    const data = { args: context.arguments, result: recordedResult(result as McpToolResult), before: context.before };
    if (entry.undoIf !== undefined && falsy(entry.undoIf.over(data))) {
      return { type: UNDO_NONE, params: { why: entry.why ?? `the undo table's condition (${entry.undoIf.source}) did not hold` } };
    }
    const calls: Json[] = [];
    for (const declared of entry.undo) {
      const { values, missing } = argumentsOf(declared, data);
      if (missing !== undefined) {
        const failedRead = context.before === null && entry.before !== undefined ? ' (the read made before the call failed)' : '';
        const fails = `the undo of ${call.apiName} cannot run: ${declared.tool}'s argument ${missing} found nothing${failedRead}`;
        return { type: MCP_TOOLS, params: { server, calls: [], fails }, requireApproval };
      }
      if (declared.optional && empty(values)) continue; // nothing of this kind to restore
      calls.push({ tool: declared.tool, arguments: values, about: named(values) });
    }
    if (!calls.length) return { type: UNDO_NONE, params: { why: 'nothing to undo: the call changed nothing its undo would restore' } };
    return { type: MCP_TOOLS, params: { server, calls }, requireApproval };
  },

  checkUndo(undo: UndoConfig): void {
    if (undo.type !== MCP_TOOLS) return;
    const calls = undo.params['calls'];
    if (typeof undo.params['server'] !== 'string' || !Array.isArray(calls)) {
      throw new ValidationError('undo', 'an mcp-tools undo names its server and lists its calls');
    }
    calls.forEach((call, i) => {
      const c = call as { [key: string]: Json } | null;
      if (typeof c !== 'object' || c === null || typeof c['tool'] !== 'string' || typeof c['arguments'] !== 'object' || c['arguments'] === null) {
        throw new ValidationError(`undo.calls[${i}]`, 'a call is {"tool": NAME, "arguments": {...}}');
      }
    });
    if (!calls.length && typeof undo.params['fails'] !== 'string') {
      throw new ValidationError('undo.calls', 'an mcp-tools undo makes one call or more');
    }
  },

  isTransient(error: unknown): boolean {
    return TRANSIENT_CODES.has((error as { code?: unknown } | null)?.code as number);
  },

  rollsBack(call: PreparedCall, error: unknown): boolean {
    // A JSON-RPC error is the server's answer, as an isError result is; a lost connection is not. The SDK is an
    // optional peer, so its McpError is known by its name and numeric code rather than imported.
    const code = (error as { code?: unknown } | null)?.code;
    const answered = error instanceof Error && error.name === 'McpError' && typeof code === 'number' && !TRANSIENT_CODES.has(code);
    return !(answered && (call.context as ToolCallContext).binding.onToolError === 'record');
  },

  isClosed(client: unknown): boolean {
    return (client as McpBinding).isClosed();
  },

  serves(client: unknown, undo: UndoConfig): boolean {
    return (client as McpBinding).server === undo.params['server'];
  },

  reopen(client: unknown): McpBinding {
    return (client as McpBinding).reopened();
  },

  async runUndo(undo: UndoConfig, client: unknown, idempotencyKey: string): Promise<void> {
    if (undo.type !== MCP_TOOLS) throw new ValidationError('undo', `connector 'mcp' cannot run undo type '${undo.type}'`);
    if (typeof undo.params['fails'] === 'string') throw new UndoError(undo.params['fails']);
    const server = String(undo.params['server']);
    const binding = client as McpBinding;
    if (binding.server !== server) {
      // each MCP server is a service of its own
      throw new UndoError(`the undo of a call to '${server}' cannot run through a client of '${binding.server}'`);
    }
    const calls = undo.params['calls'] as unknown as readonly { tool: string; arguments: { [key: string]: Json } }[];
    await binding.connected(async (open) => {
      for (const [i, call] of calls.entries()) {
        const answer = await callTool(open, call.tool, call.arguments, `${idempotencyKey}-${i}`);
        if (answer.isError) throw new UndoError(`${server}.${call.tool} answered an error: ${textOf(answer) || 'no reason given'}`);
      }
    });
  },
};

async function prepared(
  binding: McpBinding,
  name: string,
  args: { readonly [key: string]: Json },
  meta: unknown,
  rest: readonly unknown[],
): Promise<PreparedCall | null> {
  const entry = binding.table.tools.get(name);
  const tool = await binding.tool(name);
  const operation = classify(name, entry, tool);
  if (operation === 'READ') return null;
  const apiName = `${binding.server}.${name}`;
  const context: ToolCallContext = { binding, entry, arguments: args, before: null };
  const hints = tool?.annotations;
  const title = tool?.title ?? hints?.title;
  const about = aboutOf(entry, args);
  return {
    apiName,
    operationType: operation,
    payload: { tool: name, arguments: args, ...(title ? { title } : {}), ...(about.length ? { about } : {}) },
    context,
    retrySafe: entry?.idempotent ?? hints?.idempotentHint === true,
    async run(idempotencyKey: string): Promise<McpToolResult> {
      if (entry?.before !== undefined) context.before = await readBefore(binding, entry.before, args, idempotencyKey);
      const result = await callTool(binding.client!, name, args, idempotencyKey, rest, meta);
      if (result.isError && binding.onToolError === 'rollback') throw new McpToolError(apiName, result);
      return result;
    },
  };
}

/** The table decides; else the tool's annotations; else the verb of its name; else OTHER. The server is not
 *  trusted: a tool it calls read-only whose name says it writes (`remove_entry`) is recorded as its name says, for
 *  a read passes every policy unrecorded. */
export function classify(name: string, entry: ToolEntry | undefined, tool: McpTool | undefined): ToolOperation {
  if (entry?.operation !== undefined) return entry.operation;
  const hints = tool?.annotations;
  const byName = operationByVerb(name);
  if (hints?.readOnlyHint) return byName === 'READ' || byName === 'OTHER' ? 'READ' : byName;
  if (hints?.destructiveHint) return byName === 'DELETE' ? 'DELETE' : 'UPDATE';
  return byName;
}

/** A tool's answer as recorded and as an undo table reads it (`result`): its structured content, else its
 *  text, parsed when it is JSON. */
export function recordedResult(result: McpToolResult): Json {
  if (result.structuredContent !== undefined && result.structuredContent !== null) return result.structuredContent as Json;
  const text = textOf(result);
  try {
    return JSON.parse(text) as Json;
  } catch {
    return text;
  }
}

/** The `before` read's result, or null when it could not be made (its arguments found nothing, or the server
 *  answered an error: the thing did not exist yet). */
async function readBefore(binding: McpBinding, read: ToolCall, args: { readonly [key: string]: Json }, key: string): Promise<Json> {
  const { values, missing } = argumentsOf(read, { args });
  if (missing !== undefined) return null;
  const answer = await callTool(binding.client!, read.tool, values, `${key}-before`);
  return answer.isError ? null : recordedResult(answer);
}

/** `call`'s arguments found in `data`, and the first that found nothing (named with its expression). */
function argumentsOf(call: ToolCall, data: { readonly [name: string]: unknown }): { values: { [key: string]: Json }; missing?: string } {
  const values: { [key: string]: Json } = {};
  for (const [name, expression] of call.arguments) {
    const value = expression.over(data);
    if (value === null || value === undefined) return { values, missing: `${name} (${expression.source})` };
    values[name] = value;
  }
  return { values };
}

function empty(args: { readonly [key: string]: Json }): boolean {
  const lists = Object.values(args).filter((v) => Array.isArray(v));
  return lists.length > 0 && lists.every((v) => !(v as Json[]).length);
}

function aboutOf(entry: ToolEntry | undefined, args: { readonly [key: string]: Json }): string[] {
  if (entry?.about !== undefined) {
    const found = entry.about.over({ args });
    return (Array.isArray(found) ? found : [found]).filter((v) => v !== null && v !== undefined).map(pythonStr);
  }
  return named(args);
}

/** What a call acts on, when its table does not say: the first argument that is a name or a list of names (or
 *  of objects with a `name`). */
function named(args: { readonly [key: string]: Json }): string[] {
  for (const value of Object.values(args)) {
    if (typeof value === 'string') return [value];
    if (Array.isArray(value) && value.length) {
      const names = value.map((v) => (typeof v === 'string' ? v : typeof v === 'object' && v !== null && !Array.isArray(v) ? v['name'] : null));
      if (names.every((n) => typeof n === 'string')) return names as string[];
    }
  }
  return [];
}

/** `str(value)` as Python writes it for what an `about` finds (a boolean reads True or False), so both record alike. */
function pythonStr(value: Json): string {
  if (typeof value === 'boolean') return value ? 'True' : 'False';
  return typeof value === 'string' ? value : JSON.stringify(value);
}

function textOf(result: McpToolResult): string {
  return (result.content ?? [])
    .filter((block) => block.type === 'text' && typeof block.text === 'string')
    .map((block) => block.text)
    .join('\n');
}
