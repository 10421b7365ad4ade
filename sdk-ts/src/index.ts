export { AgentRein, API_KEY_ENV, URL_ENV } from './client.js';
export type {
  AgentReinOptions,
  Approval,
  Decision,
  ListedApproval,
  NewPolicy,
  NewSession,
  Policy,
  Session,
  SessionAction,
  SessionRef,
} from './client.js';
export { operationByVerb } from './connector.js';
export type { Connector, Json, OperationType, PreparedCall, UndoConfig } from './connector.js';
export { connectorNamed, registerConnector } from './connectors/index.js';
export { HttpStatusError, httpConnector } from './connectors/http.js';
export { McpToolError, mcpConnector } from './connectors/mcp.js';
export {
  AgentReinError,
  AgentReinUnavailableError,
  ApprovalRejectedError,
  ApprovalTimeoutError,
  ForbiddenError,
  InvalidTransitionError,
  NotFoundError,
  PolicyBlockedError,
  RollbackFailedError,
  RollbackRefusedError,
  UnauthorizedError,
  UndoError,
  ValidationError,
} from './errors.js';
export { ROLLBACK_FAILURE } from './guard.js';
export { JOURNAL_ENV } from './outbox.js';
export type { FailureMode, UndoOverride, UndoOverrides, UndoTableSource, WrapOptions } from './options.js';
export { DEFAULT_SENSITIVE_FIELDS, REDACTED, Redactor } from './redaction.js';
export type {
  ActionStatus,
  ApprovalPurpose,
  ApprovalStatus,
  DisplayStatus,
  PolicyEffect,
  PolicyOperationType,
  SessionStatus,
  UndoStatus,
} from './statuses.js';
export { mergeUndo, NO_UNDO, UNDO_NONE } from './undo.js';
