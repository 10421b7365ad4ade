/**
 * Undo tables: what each tool of one MCP server does and how it is undone, declared as data (DESIGN §4a; the
 * twin of `agentrein_mcp.tables`, whose docstring defines the format). The same JSON means the same in both
 * languages: expressions are JMESPath over `{ args, result, before }`, evaluated with
 * `@jmespath-community/jmespath` (an optional peer dependency, loaded when an MCP client is wrapped).
 *
 * The built-in tables of the reference servers (`contract/mcp/*.json`) ship in the package (`mcp-tables/`,
 * copied at build time) and are found by the name the server gives itself (`serverInfo`); a user's table
 * extends or overrides one entry by entry.
 */

import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, extname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

import type { Json, OperationType } from '../connector.js';
import { ValidationError } from '../errors.js';

export const NO_UNDO = 'none';
const ENTRY_KEYS = new Set(['operation', 'undo', 'before', 'undoIf', 'why', 'idempotent', 'requireApproval', 'about']);
const CALL_KEYS = new Set(['tool', 'arguments', 'optional']);
const OPERATIONS = new Set(['CREATE', 'UPDATE', 'DELETE', 'READ', 'OTHER']);
const JMESPATH = '@jmespath-community/jmespath';

/** A table's operation: those of a recorded call, or a read that passes through. */
export type ToolOperation = OperationType | 'READ';

/** A JMESPath expression, compiled once when its table is read. */
export class Expression {
  constructor(
    readonly source: string,
    private readonly compiled: unknown,
  ) {}

  /** What the expression finds in `data`; `null` (found nothing) where it does not apply to what is there (a
   *  function given the wrong type, say), as where a path is missing: as the Python connector does. */
  over(data: { readonly [name: string]: unknown }): Json {
    try {
      return jmespath().TreeInterpreter.search(this.compiled, data as Json);
    } catch (error) {
      if (error instanceof ValidationError) throw error; // the package itself is missing: say so
      return null;
    }
  }
}

/** A call a table declares (an undo, or a `before` read): the tool and how its arguments are found. */
export interface ToolCall {
  readonly tool: string;
  readonly arguments: ReadonlyMap<string, Expression>;
  readonly optional: boolean;
}

/** What a table says of one tool. */
export interface ToolEntry {
  readonly operation?: ToolOperation;
  /** undefined: the table does not say; []: "none". */
  readonly undo?: readonly ToolCall[];
  readonly before?: ToolCall;
  readonly undoIf?: Expression;
  readonly why?: string;
  readonly idempotent?: boolean;
  readonly requireApproval: boolean;
  readonly about?: Expression;
}

export interface UndoTable {
  readonly server: string;
  readonly serverInfo?: string;
  readonly tools: ReadonlyMap<string, ToolEntry>;
}

export const EMPTY: UndoTable = { server: '', tools: new Map() };

/** A table from its parsed form, or from a `.json`, `.yaml` or `.yml` file (YAML read by the `yaml` package, an
 *  optional peer); `ValidationError` naming the part at fault otherwise. */
export function loadTable(source: unknown, field = 'undo'): UndoTable {
  if (typeof source !== 'string') return parseTable(source, field);
  const kind = extname(source);
  if (!['.json', '.yaml', '.yml'].includes(kind)) {
    throw new ValidationError(field, `the undo table ${JSON.stringify(source)} must be a .json, .yaml or .yml file`);
  }
  let text: string;
  try {
    text = readFileSync(source, 'utf8');
  } catch (error) {
    const reason = (error as NodeJS.ErrnoException).code ?? String(error);
    throw new ValidationError(field, `cannot read the undo table ${JSON.stringify(source)}: ${reason}`);
  }
  let data: unknown;
  try {
    data = kind === '.json' ? JSON.parse(text) : yamlParser(field).parse(text);
  } catch (error) {
    if (error instanceof ValidationError) throw error;
    throw new ValidationError(field, `the undo table ${JSON.stringify(source)} is not valid: ${(error as Error).message}`);
  }
  return parseTable(data, field);
}

export function parseTable(data: unknown, field = 'undo'): UndoTable {
  if (!isObject(data)) throw new ValidationError(field, "an undo table is an object with 'server' and 'tools'");
  const unknown = Object.keys(data).filter((k) => !['server', 'serverInfo', 'tools'].includes(k)).sort();
  if (unknown.length) throw new ValidationError(`${field}.${unknown[0]}`, 'unknown key (a table has server, serverInfo and tools)');
  const server = data['server'] ?? '';
  if (typeof server !== 'string') throw new ValidationError(`${field}.server`, "must be the server's name");
  const serverInfo = data['serverInfo'];
  if (serverInfo !== undefined && serverInfo !== null && typeof serverInfo !== 'string') {
    throw new ValidationError(`${field}.serverInfo`, 'must be the name the server gives itself');
  }
  const tools = data['tools'] ?? {};
  if (!isObject(tools)) throw new ValidationError(`${field}.tools`, 'must map tool names to what each does');
  return {
    server,
    ...(typeof serverInfo === 'string' ? { serverInfo } : {}),
    tools: new Map(Object.entries(tools).map(([name, entry]) => [name, parseEntry(`${field}.tools.${name}`, entry)])),
  };
}

/** The user's table over the built-in one: a user's entry replaces the built-in entry of its tool. */
export function combined(builtIn: UndoTable | undefined, user: UndoTable | undefined): UndoTable {
  if (builtIn === undefined) return user ?? EMPTY;
  if (user === undefined) return builtIn;
  const serverInfo = user.serverInfo ?? builtIn.serverInfo;
  return {
    server: user.server || builtIn.server,
    ...(serverInfo === undefined ? {} : { serverInfo }),
    tools: new Map([...builtIn.tools, ...user.tools]),
  };
}

let builtIns: readonly UndoTable[] | undefined;

/** The tables shipped for the reference servers (`contract/mcp`, shared with the Python connector). */
export function builtInTables(): readonly UndoTable[] {
  if (builtIns === undefined) {
    const folder = tablesFolder();
    const names = readdirSync(folder).filter((n) => n.endsWith('.json')).sort();
    builtIns = names.map((n) => parseTable(JSON.parse(readFileSync(join(folder, n), 'utf8')), n));
  }
  return builtIns;
}

export function builtInFor(serverInfoName: string | undefined): UndoTable | undefined {
  if (!serverInfoName) return undefined;
  return builtInTables().find((t) => t.serverInfo === serverInfoName);
}

/** Whether JMESPath counts `value` false (as Python's `jmespath` does, and `not value` there): false, null, an
 *  empty string, list or object. */
export function falsy(value: unknown): boolean {
  if (value === null || value === undefined || value === false || value === '') return true;
  if (Array.isArray(value)) return value.length === 0;
  return isObject(value) && Object.keys(value).length === 0;
}

/** `mcp-tables/` of the package: beside `package.json`, above this module (in `dist/` or `dist-test/`). */
function tablesFolder(): string {
  let folder = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    const candidate = join(folder, 'mcp-tables');
    if (existsSync(candidate)) return candidate;
    const parent = dirname(folder);
    if (parent === folder) throw new Error("the agentrein package lacks its mcp-tables folder: run 'npm run build'");
    folder = parent;
  }
}

function parseEntry(field: string, data: unknown): ToolEntry {
  if (!isObject(data)) {
    throw new ValidationError(field, 'must be an object such as {"undo": {"tool": ..., "arguments": {...}}}');
  }
  const unknown = Object.keys(data).filter((k) => !ENTRY_KEYS.has(k)).sort();
  if (unknown.length) {
    throw new ValidationError(`${field}.${unknown[0]}`, `unknown key (allowed: ${[...ENTRY_KEYS].sort().join(', ')})`);
  }
  let operation: ToolOperation | undefined;
  if (data['operation'] !== undefined && data['operation'] !== null) {
    const upper = String(data['operation']).toUpperCase();
    if (!OPERATIONS.has(upper)) throw new ValidationError(`${field}.operation`, `must be one of ${[...OPERATIONS].join(', ')}`);
    operation = upper as ToolOperation;
  }
  const undoData = data['undo'];
  let undo: readonly ToolCall[] | undefined;
  if (undoData === undefined || undoData === null) undo = undefined;
  else if (undoData === NO_UNDO) undo = [];
  else if (Array.isArray(undoData)) {
    if (!undoData.length) throw new ValidationError(`${field}.undo`, 'an empty list undoes nothing: write "none"');
    undo = undoData.map((call, i) => parseCall(`${field}.undo[${i}]`, call));
  } else undo = [parseCall(`${field}.undo`, undoData)];
  for (const flag of ['idempotent', 'requireApproval']) {
    if (flag in data && typeof data[flag] !== 'boolean') throw new ValidationError(`${field}.${flag}`, 'must be true or false');
  }
  const why = data['why'];
  if (why !== undefined && why !== null && typeof why !== 'string') {
    throw new ValidationError(`${field}.why`, 'must be the words a reviewer reads');
  }
  return {
    ...(operation === undefined ? {} : { operation }),
    ...(undo === undefined ? {} : { undo }),
    ...('before' in data ? { before: parseCall(`${field}.before`, data['before']) } : {}),
    ...('undoIf' in data ? { undoIf: expression(`${field}.undoIf`, data['undoIf']) } : {}),
    ...(typeof why === 'string' ? { why } : {}),
    ...(typeof data['idempotent'] === 'boolean' ? { idempotent: data['idempotent'] } : {}),
    requireApproval: data['requireApproval'] === true,
    ...('about' in data ? { about: expression(`${field}.about`, data['about']) } : {}),
  };
}

function parseCall(field: string, data: unknown): ToolCall {
  if (!isObject(data) || typeof data['tool'] !== 'string' || !data['tool']) {
    throw new ValidationError(field, 'a call is {"tool": NAME, "arguments": {NAME: EXPRESSION}}');
  }
  const unknown = Object.keys(data).filter((k) => !CALL_KEYS.has(k)).sort();
  if (unknown.length) {
    throw new ValidationError(`${field}.${unknown[0]}`, `unknown key (allowed: ${[...CALL_KEYS].sort().join(', ')})`);
  }
  const args = data['arguments'] ?? {};
  if (!isObject(args)) throw new ValidationError(`${field}.arguments`, 'must map argument names to JMESPath expressions');
  const optional = data['optional'] ?? false;
  if (typeof optional !== 'boolean') throw new ValidationError(`${field}.optional`, 'must be true or false');
  return {
    tool: data['tool'],
    arguments: new Map(Object.entries(args).map(([k, v]) => [k, expression(`${field}.arguments.${k}`, v)])),
    optional,
  };
}

function expression(field: string, source: unknown): Expression {
  if (typeof source !== 'string') throw new ValidationError(field, 'must be a JMESPath expression (a string)');
  let compiled: unknown;
  try {
    compiled = jmespath().compile(source);
  } catch (error) {
    throw new ValidationError(field, `is not a JMESPath expression: ${(error as Error).message}`);
  }
  return new Expression(source, compiled);
}

/** What this module uses of `@jmespath-community/jmespath`. */
interface JmesPath {
  compile(expression: string): unknown;
  readonly TreeInterpreter: { search(node: unknown, value: Json): Json };
}

let loaded: JmesPath | undefined;

interface Yaml {
  parse(text: string): unknown;
}

/** The `yaml` package, loaded when a YAML table is read (an optional peer; CommonJS, so required synchronously). */
function yamlParser(field: string): Yaml {
  try {
    return createRequire(import.meta.url)('yaml') as Yaml;
  } catch {
    throw new ValidationError(field, 'a YAML undo table is read with the yaml package: npm install yaml');
  }
}

/** The JMESPath package, loaded when a table is first read: an optional peer, so the SDK needs it only for MCP
 *  (required synchronously, for `wrap()` is synchronous; the package ships a CommonJS build). */
function jmespath(): JmesPath {
  if (loaded === undefined) {
    try {
      loaded = createRequire(import.meta.url)(JMESPATH) as JmesPath;
    } catch {
      throw new ValidationError('connector', `the 'mcp' connector reads undo tables with ${JMESPATH}: npm install ${JMESPATH}`);
    }
  }
  return loaded;
}

function isObject(value: unknown): value is { [key: string]: unknown } {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
