/**
 * The statuses of DESIGN §4, exact spelling, as string-literal unions. Each is checked at compile time
 * against the server's OpenAPI document (`wire.ts`): a value added or renamed on either side fails `tsc`.
 */

import type { components } from './wire.js';

type Schemas = components['schemas'];

export type ActionStatus = 'PENDING_APPROVAL' | 'CLEARED' | 'SUCCESS' | 'FAILED' | 'ROLLED_BACK' | 'ROLLBACK_FAILED';
export type UndoStatus = 'NONE' | 'SKIPPED' | 'IN_PROGRESS' | 'AWAITING_APPROVAL' | 'DONE' | 'FAILED' | 'DECLINED';
export type SessionStatus = 'ACTIVE' | 'COMPLETED' | 'FAILED' | 'ROLLED_BACK' | 'ABANDONED';
export type DisplayStatus =
  | 'ROLLING_BACK'
  | 'ROLLBACK_FAILED'
  | 'AWAITING_APPROVAL'
  | 'REVERTED'
  | 'PARTIALLY_REVERTED'
  | 'ACTIVE'
  | 'COMPLETED'
  | 'ABANDONED'
  | 'FAILED';
export type ApprovalStatus = 'PENDING' | 'APPROVED' | 'REJECTED' | 'EXPIRED';
export type ApprovalPurpose = 'BEFORE_EXECUTION' | 'AFTER_EXECUTION' | 'ROLLBACK';
export type PolicyEffect = 'ALLOW' | 'REQUIRE_APPROVAL' | 'BLOCK';
/** The operation types a policy matches (a wrapped call is never `READ`: reads pass through unrecorded). */
export type PolicyOperationType = 'CREATE' | 'UPDATE' | 'DELETE' | 'OTHER' | 'READ';

type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const agrees = <T extends true>(): T | undefined => undefined;
agrees<Same<ActionStatus, Schemas['ActionStatus']>>();
agrees<Same<UndoStatus, Schemas['UndoStatus']>>();
agrees<Same<SessionStatus, Schemas['SessionStatus']>>();
agrees<Same<DisplayStatus, Schemas['DisplayStatus']>>();
agrees<Same<ApprovalStatus, Schemas['ApprovalStatus']>>();
agrees<Same<ApprovalPurpose, Schemas['ApprovalPurpose']>>();
agrees<Same<PolicyEffect, Schemas['PolicyEffect']>>();
agrees<Same<PolicyOperationType, Schemas['OperationType']>>();
