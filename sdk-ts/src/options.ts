/** The options of one `wrap()` call, checked once when the client is wrapped (as `agentrein._options`). */

import type { Connector, Json } from './connector.js';
import { ValidationError } from './errors.js';
import { checkedGlob, globMatches } from './glob.js';
import type { ConnectorRegistry } from './registry.js';
import { UNDO_NONE } from './undo.js';

export type FailureMode = 'open' | 'closed';

/** An undo override: `{ type: 'http-delete', url }`, `{ type: 'none' }`, `{ requireApproval: true }`... */
export type UndoOverride = { readonly type?: string; readonly requireApproval?: boolean } & {
  readonly [key: string]: Json | undefined;
};

/** What an agent passes as `agentrein.wrap(client, session, options)`. */
export interface WrapOptions {
  /** `'stripe' | 'github' | 'http'`, a plugin's name (`agentrein.registerConnector`), or the connector itself. */
  readonly connector: 'stripe' | 'github' | 'http' | (string & {}) | Connector;
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
  /** Api-name glob -> undo override (an exact name first, else the first matching glob). */
  readonly undo?: { readonly [apiNameGlob: string]: UndoOverride };
}

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
    readonly undo: { readonly [glob: string]: UndoOverride },
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
    const undo = options.undo ?? {};
    if (typeof undo !== 'object' || undo === null || Array.isArray(undo)) {
      throw new ValidationError('undo', "must map api-name globs to undo overrides such as { type: 'none' }");
    }
    for (const [glob, override] of Object.entries(undo)) {
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
      undo,
    );
  }

  /** Whether the call needs a reviewer's approval before it runs: by its canonical name or its path. */
  needsApproval(apiName: string, path: readonly string[]): boolean {
    return matchesAny(this.requiresApproval, apiName, path);
  }

  isRetryable(apiName: string, path: readonly string[]): boolean {
    return matchesAny(this.retryable, apiName, path);
  }

  /** The caller's undo override for `apiName`: an exact key first, else the first matching glob. */
  undoOverride(apiName: string): UndoOverride | undefined {
    if (Object.hasOwn(this.undo, apiName)) return this.undo[apiName];
    return Object.entries(this.undo).find(([glob]) => globMatches(apiName, glob))?.[1];
  }
}

function matchesAny(globs: readonly string[], apiName: string, path: readonly string[]): boolean {
  const called = path.join('.');
  return globs.some((g) => globMatches(apiName, g) || globMatches(called, g));
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
