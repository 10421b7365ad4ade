/**
 * The errors an agent may catch: the tree of the Python SDK (`agentrein_core.errors`, `agentrein._errors`).
 * Each class has its problem+json `type` slug; `fromProblem` turns a server's answer back into the same
 * named error, with the server's `detail` as its message, so agent code catches what the server meant.
 */

import type { components } from './wire.js';

type Problem = Partial<components['schemas']['ProblemDetails']>;
type SessionInfo = components['schemas']['SessionInfo'];
type Action = components['schemas']['Action'];

/** Base class of every error AgentRein raises on purpose. */
export class AgentReinError extends Error {
  static readonly problemType: string = 'agentrein-error';
  /** Whether recording a call that meets this error means action logging failed, so the call does not run
   *  and the session is rolled back (`agentrein_core.errors.AgentReinError.rolls_back`). */
  static readonly rollsBack: boolean = true;
  /** The HTTP status the server answered with (500 when it came from this process). */
  readonly status: number;
  /** This error's `rollsBack`: the server's answer says it (`fromProblem`), else its class. */
  rollsBack: boolean;

  constructor(message: string, status = 500) {
    super(message);
    this.name = new.target.name;
    this.status = status;
    this.rollsBack = (new.target as typeof AgentReinError).rollsBack;
  }
}

/** Bad input, naming the field at fault (a bad `wrap()` option, a record the server refused as invalid). */
export class ValidationError extends AgentReinError {
  static override readonly problemType: string = 'validation-error';
  readonly field: string;

  constructor(field: string, message: string, options: { status?: number; raw?: boolean } = {}) {
    super(options.raw ? message : `${field}: ${message}`, options.status ?? 400);
    this.field = field;
  }
}

/** No such record in this organisation. */
export class NotFoundError extends AgentReinError {
  static override readonly problemType: string = 'not-found';
  static override readonly rollsBack: boolean = false;
  constructor(
    message: string,
    readonly kind: string = 'record',
    readonly recordId: string = '?',
  ) {
    super(message, 404);
  }
}

/** No API key, or one that is unknown or revoked. */
export class UnauthorizedError extends AgentReinError {
  static override readonly problemType: string = 'unauthorized';
  static override readonly rollsBack: boolean = false;
  constructor(message: string) {
    super(message, 401);
  }
}

/** The API key is valid but its role may not do this. */
export class ForbiddenError extends AgentReinError {
  static override readonly problemType: string = 'forbidden';
  static override readonly rollsBack: boolean = false;
  constructor(message: string) {
    super(message, 403);
  }
}

/** A status change the rules forbid (completing a session whose rollback runs, say). */
export class InvalidTransitionError extends AgentReinError {
  static override readonly problemType: string = 'invalid-transition';
  static override readonly rollsBack: boolean = false;
  constructor(message: string) {
    super(message, 409);
  }
}

/** A rollback the rules of the status reference (§3) do not allow for this session or caller. */
export class RollbackRefusedError extends InvalidTransitionError {
  static override readonly problemType: string = 'rollback-refused';
}

/** A `BLOCK` policy matched: the action is stored `FAILED` and the call never ran. */
export class PolicyBlockedError extends AgentReinError {
  static override readonly problemType: string = 'policy-blocked';
  static override readonly rollsBack: boolean = false;
  constructor(
    message: string,
    readonly actionId: string = '',
    readonly policyName: string = '',
  ) {
    super(message, 403);
  }
}

/** A before-execution approval was rejected (or the plan has no approval gates): the action is `FAILED`
 *  and the session rolled back. `reason` is the reviewer's reason, `reviewer` who decided. */
export class ApprovalRejectedError extends AgentReinError {
  static override readonly problemType: string = 'approval-rejected';
  static override readonly rollsBack: boolean = false;
  constructor(
    message: string,
    readonly reason: string | null = null,
    readonly reviewer: string | null = null,
    readonly approvalId: string | null = null,
    readonly actionId: string | null = null,
  ) {
    super(message, 403);
  }
}

/** A before-execution approval expired undecided: the action is `FAILED` and the session rolled back. */
export class ApprovalTimeoutError extends AgentReinError {
  static override readonly problemType: string = 'approval-expired';
  static override readonly rollsBack: boolean = false;
  constructor(
    message: string,
    readonly approvalId: string = '?',
    readonly actionId: string | null = null,
  ) {
    super(message, 403);
  }
}

/** The AgentRein server cannot be reached, or cannot serve now (502, 503, 504). With `failureMode:
 *  'closed'` a wrapped call throws it before any side effect. */
export class AgentReinUnavailableError extends AgentReinError {
  static override readonly problemType: string = 'unavailable';
  constructor(message: string) {
    super(message, 503);
  }
}

/** A rollback ended with an undo that failed: `action` is `ROLLBACK_FAILED`, the chain stopped there, and
 *  `session` is the session as it then stands. An operator fixes the cause and rolls back again. */
export class RollbackFailedError extends AgentReinError {
  static override readonly problemType: string = 'undo-failed';
  constructor(
    readonly session: SessionInfo,
    readonly action: Action,
  ) {
    super(
      `the rollback of session ${session.id} failed: the undo of ${action.apiName} (seq ${action.seq}) failed: ` +
        (action.error ?? 'no reason given'),
    );
  }

  /** The error a rollback that left `session` so stands for, if its chain stopped at a failed undo. */
  static of(session: SessionInfo): RollbackFailedError | null {
    const failed = session.actions.filter((a) => a.status === 'ROLLBACK_FAILED');
    const last = failed[failed.length - 1];
    return last ? new RollbackFailedError(session, last) : null;
  }
}

/** An undo this process ran for the server (one the server cannot run: an MCP tool over the agent's stdio)
 *  failed; its message is the reason the session's record shows. */
export class UndoError extends AgentReinError {
  static override readonly problemType: string = 'undo-failed';
}

const UNAVAILABLE_STATUSES = new Set([502, 503, 504]);

/** The error a problem+json answer stands for (the rules of `agentrein_core.errors.from_problem`), with the
 *  answer's `rollsBack` where it has one. */
export function fromProblem(status: number, body: unknown): AgentReinError {
  const problem: Problem = typeof body === 'object' && body !== null ? (body as Problem) : {};
  const error = rebuilt(status, problem);
  if (typeof problem.rollsBack === 'boolean') error.rollsBack = problem.rollsBack;
  return error;
}

function rebuilt(status: number, problem: Problem): AgentReinError {
  const detail = typeof problem.detail === 'string' && problem.detail ? problem.detail : `HTTP ${status} from the AgentRein server`;
  const slug = String(problem.type ?? '').split('/').pop() ?? '';
  if (UNAVAILABLE_STATUSES.has(status) || slug === AgentReinUnavailableError.problemType) {
    return new AgentReinUnavailableError(`the AgentRein server is unavailable: ${detail}`);
  }
  if (status >= 500) return new AgentReinError(`the AgentRein server failed: ${detail}`, status);
  switch (slug) {
    case NotFoundError.problemType:
      return new NotFoundError(detail, problem.kind, problem.id);
    case UnauthorizedError.problemType:
      return new UnauthorizedError(detail);
    case ForbiddenError.problemType:
      return new ForbiddenError(detail);
    case InvalidTransitionError.problemType:
      return new InvalidTransitionError(detail);
    case RollbackRefusedError.problemType:
      return new RollbackRefusedError(detail);
    case PolicyBlockedError.problemType:
      return new PolicyBlockedError(detail, problem.actionId ?? '', problem.policyName ?? '');
    case ApprovalRejectedError.problemType:
      return new ApprovalRejectedError(detail, problem.reason ?? null, null, problem.approvalId ?? null, problem.actionId ?? null);
    case ApprovalTimeoutError.problemType:
      return new ApprovalTimeoutError(detail, problem.approvalId ?? '?', problem.actionId ?? null);
    default:
      // A 4xx of a slug this SDK does not know (validation-error among them): bad input, as Python reads it.
      return new ValidationError(problem.field ?? 'request', detail, { status, raw: true });
  }
}
