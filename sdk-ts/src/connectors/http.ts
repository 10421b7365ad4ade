/**
 * The http connector for `fetch` (the twin of `agentrein_http.connector`):
 *
 * - `GET`/`HEAD`/`OPTIONS` are reads and pass through unrecorded; `POST` is a CREATE, `PUT`/`PATCH` an
 *   UPDATE, `DELETE` a DELETE. The api name is `"METHOD /path"` (no query string).
 * - Every recorded request carries an `Idempotency-Key` header (the same on every retry of the action).
 * - An error status (>= 400) rejects with `HttpStatusError` (its `response` kept), as httpx's
 *   `raise_for_status` does for the Python connector: a failed call is recorded FAILED and rolls back.
 *   Network errors and 429/502/503/504 are transient.
 * - A CREATE is undone by `DELETE` of the response's `Location`, else of `{request URL}/{json id}`; other
 *   calls are not undone unless the caller gives an undo (`http-delete` or `http-request`, or a `path`
 *   template such as `/v1/things/{id}/cancel` filled from the answer's JSON).
 */

import type { Connector, Json, OperationType, PreparedCall, UndoConfig } from '../connector.js';
import { ValidationError } from '../errors.js';
import { REDACTED } from '../redaction.js';
import { mergeUndo, NO_UNDO } from '../undo.js';

export const IDEMPOTENCY_HEADER = 'Idempotency-Key';
export const HTTP_DELETE = 'http-delete';
export const HTTP_REQUEST = 'http-request';
const OPERATIONS: Readonly<Record<string, OperationType>> = { POST: 'CREATE', PUT: 'UPDATE', PATCH: 'UPDATE', DELETE: 'DELETE' };
const READS = new Set(['GET', 'HEAD', 'OPTIONS']);
export const TRANSIENT_STATUSES: ReadonlySet<number> = new Set([429, 502, 503, 504]);
/** Headers that say nothing about the call and are left out of the record. */
const UNRECORDED_HEADERS = new Set(['accept', 'accept-encoding', 'connection', 'user-agent', 'host', 'content-length']);
const MAX_BODY = 64 * 1024;
const TEMPLATE_FIELD = /\{(\w+)\}/g;

/** A response with an error status, as the http connector reports it (the call failed). */
export class HttpStatusError extends Error {
  constructor(readonly response: Response) {
    super(`${response.status} ${response.statusText} from ${response.url}`);
    this.name = 'HttpStatusError';
  }
}

/** What `prepare` keeps for `recordResult` and `undoFor`: the request, and the answer's body once read. */
interface Exchange {
  readonly request: Request;
  body?: Uint8Array;
}

type Fetch = (input: string | URL | Request, init?: RequestInit) => Promise<Response>;

export const httpConnector: Connector = {
  name: 'http',
  sensitiveFields: ['signature', 'credential'],
  undoTypes: [HTTP_DELETE, HTTP_REQUEST],

  checkUndo(undo: UndoConfig): void {
    if (undo.type !== HTTP_DELETE && undo.type !== HTTP_REQUEST) return;
    const url = undo.params['url'];
    if (typeof url !== 'string' || !/^https?:\/\//.test(url)) {
      throw new ValidationError('undo.url', 'an http undo needs the absolute http(s) URL to call');
    }
    if (undo.type === HTTP_REQUEST && !(String(undo.params['method'] ?? '').toUpperCase() in OPERATIONS)) {
      throw new ValidationError('undo.method', 'an http-request undo needs a method among POST, PUT, PATCH, DELETE');
    }
  },

  checkUndoOverride(glob: string, override: { readonly [key: string]: Json }): void {
    if (override['type'] === HTTP_REQUEST && !(String(override['method'] ?? '').toUpperCase() in OPERATIONS)) {
      throw new ValidationError(`undo['${glob}'].method`, 'an http-request undo needs a method among POST, PUT, PATCH, DELETE');
    }
  },

  accepts(client: unknown): boolean {
    return typeof client === 'function';
  },

  descend(): boolean {
    return false; // fetch is one function: nothing below it to guard
  },

  prepare(client: unknown, path: readonly string[], args: readonly unknown[]): PreparedCall | null {
    if (path.length !== 0) return null;
    const init = args[1] as RequestInit | undefined;
    let request = new Request(args[0] as string | URL | Request, init);
    // fetch sends `patch` as written; httpx, and so the Python connector, sends and names it `PATCH`.
    if (request.method !== request.method.toUpperCase()) request = new Request(request, { method: request.method.toUpperCase() });
    if (READS.has(request.method)) return null;
    const exchange: Exchange = { request };
    const url = new URL(request.url);
    return {
      apiName: `${request.method} ${decodedPath(url)}`,
      operationType: OPERATIONS[request.method] ?? 'OTHER',
      payload: describeRequest(request, url, requestBody(args, init)),
      context: exchange,
      async run(idempotencyKey: string): Promise<Response> {
        const headers = new Headers(request.headers);
        headers.set(IDEMPOTENCY_HEADER, idempotencyKey);
        const response = await (client as Fetch)(new Request(request.clone(), { headers }));
        if (!response.ok) throw new HttpStatusError(response);
        // Read from a copy: the agent reads the answer it gets as if it were never wrapped.
        exchange.body = new Uint8Array(await response.clone().arrayBuffer());
        return response;
      },
    };
  },

  recordResult(call: PreparedCall, result: unknown): Json {
    const response = result as Response;
    const recorded: { [key: string]: Json } = {
      statusCode: response.status,
      body: parsedBody(response.headers, (call.context as Exchange).body),
    };
    const location = response.headers.get('location');
    if (location !== null) recorded['location'] = location;
    return recorded;
  },

  undoFor(call: PreparedCall, result: unknown, override?: { readonly [key: string]: Json }): UndoConfig {
    const { request, body } = call.context as Exchange;
    const response = result as Response;
    const parsed = parsedBody(response.headers, body);
    const fields: { [key: string]: Json } = typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed) ? parsed : {};
    let derived = NO_UNDO;
    if (call.operationType === 'CREATE') {
      const location = response.headers.get('location');
      if (location !== null) {
        derived = { type: HTTP_DELETE, params: { url: new URL(location, response.url || request.url).toString() } };
      } else if (fields['id'] !== undefined && fields['id'] !== null) {
        derived = { type: HTTP_DELETE, params: { url: `${withoutQuery(new URL(request.url)).replace(/\/+$/, '')}/${String(fields['id'])}` } };
      }
    }
    const undo = mergeUndo(derived, override);
    const template = undo.params['path'];
    if (typeof template !== 'string') return undo;
    // A caller's template, e.g. { path: '/v1/things/{id}/cancel' }, filled from the answer's JSON.
    const { path: _, ...params } = undo.params;
    const target = template.replace(TEMPLATE_FIELD, (whole, name: string) =>
      fields[name] === undefined ? whole : String(fields[name]),
    );
    return { ...undo, params: { ...params, url: new URL(target, request.url).toString() } };
  },

  isTransient(error: unknown): boolean {
    if (error instanceof HttpStatusError) return TRANSIENT_STATUSES.has(error.response.status);
    // fetch's network failures (refused, reset, dropped) are TypeErrors; its timeouts TimeoutErrors.
    return error instanceof TypeError || (error instanceof Error && error.name === 'TimeoutError');
  },
};

/** The request's body as given (`prepare` is synchronous: a stream's content cannot be read here). */
function requestBody(args: readonly unknown[], init: RequestInit | undefined): Uint8Array | string | null {
  const body = init?.body ?? null;
  if (body === null) return args[0] instanceof Request && args[0].body !== null ? '<stream>' : null;
  if (typeof body === 'string') return body;
  if (body instanceof URLSearchParams) return body.toString();
  if (body instanceof ArrayBuffer) return new Uint8Array(body);
  if (ArrayBuffer.isView(body)) return new Uint8Array(body.buffer, body.byteOffset, body.byteLength);
  return `<${body.constructor.name}>`;
}

function describeRequest(request: Request, url: URL, body: Uint8Array | string | null): { [key: string]: Json } {
  const headers: { [key: string]: Json } = {};
  request.headers.forEach((value, name) => {
    if (!UNRECORDED_HEADERS.has(name)) headers[name] = value;
  });
  const content = typeof body === 'string' ? new TextEncoder().encode(body) : (body ?? undefined);
  return {
    method: request.method,
    url: withoutQuery(url),
    query: Object.fromEntries(url.searchParams),
    headers,
    body: typeof body === 'string' && body.startsWith('<') && body.endsWith('>') ? body : parsedBody(request.headers, content),
  };
}

/** The URL to store: no query string (recorded apart, redacted by key) and no password. */
function withoutQuery(url: URL): string {
  const copy = new URL(url);
  if (copy.password) copy.password = REDACTED;
  copy.search = '';
  copy.hash = '';
  return copy.toString();
}

function parsedBody(headers: Headers, content: Uint8Array | undefined): Json {
  if (!content || content.length === 0) return null;
  if (content.length > MAX_BODY) return `<${content.length} bytes>`;
  const type = headers.get('content-type') ?? '';
  const text = new TextDecoder('utf-8', { fatal: true });
  let decoded: string;
  try {
    decoded = text.decode(content);
  } catch {
    return `<${content.length} bytes>`;
  }
  if (type.includes('json')) {
    try {
      return JSON.parse(decoded) as Json;
    } catch {
      // not JSON after all: kept as text
    }
  }
  if (type.includes('x-www-form-urlencoded')) return Object.fromEntries(new URLSearchParams(decoded));
  return decoded;
}

/** The URL's path as httpx reads it, and so as the Python connector names the call: percent-decoded
 *  (`/v1/caf%C3%A9` is `/v1/café`); left as written when it does not decode. */
function decodedPath(url: URL): string {
  try {
    return decodeURIComponent(url.pathname);
  } catch {
    return url.pathname;
  }
}
