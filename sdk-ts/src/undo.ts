/** What every connector's `undoFor` shares (`agentrein_core.connector.merge_undo`). */

import type { Json, UndoConfig } from './connector.js';

/** The undo type that means "no inverse" (the action is `SKIPPED` on rollback). */
export const UNDO_NONE = 'none';
export const NO_UNDO: UndoConfig = { type: UNDO_NONE, params: {} };

/** Apply a caller's undo override: a different `type` replaces the derived config, other keys add to (or
 *  replace) its parameters, and `requireApproval` sets the approval flag either way. */
export function mergeUndo(derived: UndoConfig, override?: { readonly [key: string]: Json }): UndoConfig {
  if (!override || Object.keys(override).length === 0) return derived;
  const params = Object.fromEntries(Object.entries(override).filter(([k]) => k !== 'type' && k !== 'requireApproval'));
  const requireApproval = Boolean(override['requireApproval'] ?? derived.requireApproval ?? false);
  if ('type' in override && override['type'] !== derived.type) {
    return { type: String(override['type']), params, requireApproval };
  }
  return { type: derived.type, params: { ...derived.params, ...params }, requireApproval };
}

/** An undo as the server stores it: `{ type, requireApproval, ...params }`. */
export type WireUndo = { readonly type: string; readonly requireApproval: boolean; readonly [param: string]: Json };

export function undoToWire(undo: UndoConfig): WireUndo {
  return { ...undo.params, type: undo.type, requireApproval: undo.requireApproval ?? false };
}
