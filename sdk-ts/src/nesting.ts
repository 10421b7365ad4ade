/** How deep a recorded value may nest (`agentrein_core.nesting`): the server refuses deeper ones, and a
 *  cycle (a payload that holds itself) would nest forever. */

import { ValidationError } from './errors.js';
import type { Json } from './connector.js';

export const MAX_DEPTH = 64;

/** Whether `value` nests deeper than `limit` levels (looked at level by level, never recursively). */
export function tooDeep(value: unknown, limit = MAX_DEPTH): boolean {
  let level: unknown[] = [value];
  for (let depth = 0; level.length; depth++) {
    const next: unknown[] = [];
    for (const item of level) {
      if (typeof item === 'object' && item !== null) next.push(...Object.values(item));
    }
    if (next.length && depth + 1 > limit) return true;
    level = next;
  }
  return false;
}

/** `ValidationError` naming `field` when `value` nests too deep. */
export function checkNesting(field: string, value: unknown): void {
  if (tooDeep(value)) throw new ValidationError(field, `must be nested at most ${MAX_DEPTH} levels deep`);
}

/** `value`, or a note in its place when it nests too deep (an upstream answer may nest any depth). */
export function bounded(value: Json): Json {
  return tooDeep(value) ? { truncated: `nested deeper than ${MAX_DEPTH} levels` } : value;
}
