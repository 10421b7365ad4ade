/** The options of one `wrap()` call, checked once when the client is wrapped (as `agentrein._options`). */

import type { Connector, Json, PreparedCall } from './connector.js';
import { ValidationError } from './errors.js';
import { checkedGlob, globMatches } from './glob.js';
import type { ConnectorRegistry } from './registry.js';
import { UNDO_NONE } from './undo.js';

export type FailureMode = 'open' | 'closed';

/** An undo override: `{ type: 'http-delete', url }`, `{ type: 'none' }`, `{ requireApproval: true }`... */
export type UndoOverride = { readonly type?: string; readonly requireApproval?: boolean } & {
  readonly [key: string]: Json | undefined;
};

/** An undo override per api-name glob. */
export type UndoOverrides = { readonly [apiNameGlob: string]: UndoOverride };

/** An MCP server's undo table (`contract/mcp/*.json`: what each tool does and how it is undone), or the path of
 *  its JSON file. */
export type UndoTableSource =
  | string
  | { readonly server?: string; readonly serverInfo?: string; readonly tools?: { readonly [tool: string]: Json } };

/** What an agent passes as `agentrein.wrap(client, session, options)`. */
export interface WrapOptions {
  /** `'stripe' | 'github' | 'http' | 'mcp'`, a plugin's name (`agentrein.registerConnector`), or the connector itself. */
  readonly connector: 'stripe' | 'github' | 'http' | 'mcp' | (string & {}) | Connector;
  /** Globs over the canonical api name or the path as called (`'customers.del'`, `'POST /v1/*'`). */
  readonly requiresApproval?: readonly string[];
  /** How often a held call looks for its decision when the server cannot hold the answer (default 2000). */
  readonly pollIntervalMs?: number;
  /** How long a held call waits for its decision, and a rollback for its end (default 300000). */
  readonly timeoutMs?: number;
  /** Globs of the calls retried, under one idempotency key, on the connector's transient errors. */
  readonly retryable?: readonly string[];
  /** What a call does when AgentRein cannot be reached: `'open'` (default) runs it, journaled; `'closed'`
   *  throws `AgentReinUnavailableError` before any side effect. */
  readonly failureMode?: FailureMode;
  /** Api-name glob -> undo override (an exact name first, else the first matching glob); for the `mcp`
   *  connector, the server's undo table (extending the built-in one of a reference server), or its file. */
  readonly undo?: UndoOverrides | UndoTableSource;
  /** `mcp`: the name its tools are recorded under (`<server>.<tool>`); by default the name the server gives
   *  itself. */
  readonly server?: string;
  /** `mcp`: what a result with `isError` does: `'rollback'` (default) fails the call (`McpToolError`) and rolls
   *  the session back; `'record'` records it and hands the result back, for the model to recover. */
  readonly onToolError?: 'rollback' | 'record';
}

/** The options every connector takes; any other is a connector's own (`Connector.wrapOptions`). */
const COMMON_OPTIONS = new Set(['connector', 'requiresApproval', 'pollIntervalMs', 'timeoutMs', 'retryable', 'failureMode', 'undo']);

export const DEFAULT_POLL_INTERVAL_MS = 2000;
export const DEFAULT_TIMEOUT_MS = 300_000;

/** The options once checked. */
export class Options {
  private constructor(
    readonly connector: Connector,
    readonly requiresApproval: readonly string[],
    readonly retryable: readonly string[],
    readonly pollIntervalMs: number,
    readonly timeoutMs: number,
    readonly failureMode: FailureMode,
    readonly undo: UndoOverrides,
    /** The connector's own options (`Connector.wrapOptions`) the agent passed, for `Connector.bind`. */
    readonly own: { readonly [option: string]: unknown },
  ) {}

  /** `options` checked, a connector's name looked up in `connectors` (the wrapping client's). */
  static build(options: WrapOptions, connectors: ConnectorRegistry): Options {
    if (typeof options !== 'object' || options === null) {
      throw new ValidationError('options', "must be an object such as { connector: 'http' }");
    }
    const connector = typeof options.connector === 'string' ? connectors.named(options.connector) : options.connector;
    if (typeof connector !== 'object' || connector === null || typeof connector.prepare !== 'function') {
      throw new ValidationError('connector', 'must be a connector name or a Connector');
    }
    const failureMode = options.failureMode ?? 'open';
    if (failureMode !== 'open' && failureMode !== 'closed') {
      throw new ValidationError('failureMode', `must be 'open' or 'closed', not ${JSON.stringify(failureMode)}`);
    }
    const takes = new Set(connector.wrapOptions ?? []);
    const own: { [option: string]: unknown } = {};
    for (const [name, value] of Object.entries(options)) {
      if (value === undefined || (COMMON_OPTIONS.has(name) && !(name === 'undo' && takes.has(name)))) continue;
      if (!takes.has(name)) throw new ValidationError(name, `wrap() takes no option '${name}' for connector '${connector.name}'`);
      own[name] = value;
    }
    const undo = takes.has('undo') ? {} : (options.undo ?? {});
    if (typeof undo === 'string') {
      throw new ValidationError('undo', `connector '${connector.name}' takes undo overrides by api name, not a file`);
    }
    if (typeof undo !== 'object' || undo === null || Array.isArray(undo)) {
      throw new ValidationError('undo', "must map api-name globs to undo overrides such as { type: 'none' }");
    }
    for (const [glob, override] of Object.entries(undo as UndoOverrides)) {
      checkedGlob(`undo['${glob}']`, glob);
      if (typeof override !== 'object' || override === null || Array.isArray(override)) {
        throw new ValidationError(`undo['${glob}']`, "must be an object such as { type: 'none' }");
      }
      if (override.type !== undefined && typeof override.type !== 'string') {
        throw new ValidationError(`undo['${glob}'].type`, 'must be a string');
      }
      const known = [UNDO_NONE, ...connector.undoTypes];
      if (override.type !== undefined && !known.includes(override.type)) {
        const listed = [...new Set(known)].sort().join(', ');
        throw new ValidationError(
          `undo['${glob}'].type`,
          `${JSON.stringify(override.type)} is not an undo type of '${connector.name}' (${listed})`,
        );
      }
      connector.checkUndoOverride?.(glob, override as { readonly [key: string]: Json });
      if (override.requireApproval !== undefined && typeof override.requireApproval !== 'boolean') {
        throw new ValidationError(`undo['${glob}'].requireApproval`, 'must be true or false');
      }
    }
    return new Options(
      connector,
      globs('requiresApproval', options.requiresApproval),
      globs('retryable', options.retryable),
      milliseconds('pollIntervalMs', options.pollIntervalMs, DEFAULT_POLL_INTERVAL_MS),
      milliseconds('timeoutMs', options.timeoutMs, DEFAULT_TIMEOUT_MS),
      failureMode,
      undo as UndoOverrides,
      own,
    );
  }

  /** Whether the call needs a reviewer's approval before it runs: by its canonical name or its path. */
  needsApproval(apiName: string, path: readonly string[]): boolean {
    return this.matchesAny(this.requiresApproval, apiName, path);
  }

  /** Whether the call is retried on transient failures: it is `retryable`, and safe to run again. */
  isRetryable(call: PreparedCall, path: readonly string[]): boolean {
    return call.retrySafe !== false && this.matchesAny(this.retryable, call.apiName, path);
  }

  /** The caller's undo override for `apiName`: an exact key first, else the first matching glob. */
  undoOverride(apiName: string): UndoOverride | undefined {
    if (Object.hasOwn(this.undo, apiName)) return this.undo[apiName];
    return Object.entries(this.undo).find(([glob]) => globMatches(apiName, glob))?.[1];
  }

  private matchesAny(globs: readonly string[], apiName: string, path: readonly string[]): boolean {
    const called = path.join('.');
    const connector = this.connector;
    const named = (g: string) => (connector.globMatches ? connector.globMatches(g, apiName) : globMatches(apiName, g));
    return globs.some((g) => named(g) || globMatches(called, g));
  }
}


function globs(field: string, value: unknown): readonly string[] {
  if (value === undefined) return [];
  if (typeof value === 'string' || !Array.isArray(value)) {
    throw new ValidationError(field, 'must be a list of globs, not a single string');
  }
  return value.map((g) => checkedGlob(field, g));
}

function milliseconds(field: string, value: unknown, fallback: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0) {
    throw new ValidationError(field, `must be a positive number of milliseconds, not ${JSON.stringify(value)}`);
  }
  return value;
}
