export type { Connector, Json, OperationType, PreparedCall, UndoConfig } from './connector.js';
