/**
 * The SDK's HTTP to an AgentRein server (`agentrein._http.Connection`): one request at a time with the API
 * key, answered with its JSON or with the named error its problem+json stands for. A server that cannot
 * be reached, or answers 502/503/504, is `AgentReinUnavailableError` (`failureMode` decides what a wrapped
 * call does then). Reads are retried on connection failures (they change nothing); writes are not.
 */

import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';

import { AgentReinUnavailableError, fromProblem } from './errors.js';

export type Query = Readonly<Record<string, string | number | boolean | readonly string[] | undefined>>;

export interface RequestOptions {
  readonly body?: unknown;
  readonly query?: Query;
  /** How long the server may hold the answer back (a long-poll), on top of the timeout, in ms. */
  readonly waitMs?: number;
  /** A request nobody waits on (the undo taker's long-poll): its connection never keeps the process alive. */
  readonly background?: boolean;
  /** Ends the request early (the client was closed). */
  readonly signal?: AbortSignal;
  /** A write that may be sent again if its connection fails (asked again, the server answers what it did the
   *  first time): retried as a read is, except after its timeout (the server may still be at it). */
  readonly idempotent?: boolean;
}

const READ_ATTEMPTS = 3;

export class Connection {
  readonly baseUrl: string;
  private readonly headers: Record<string, string>;

  constructor(
    baseUrl: string,
    apiKey: string,
    readonly timeoutMs = 10_000,
  ) {
    this.baseUrl = baseUrl.replace(/\/+$/, '');
    this.headers = { Authorization: `Bearer ${apiKey}`, 'User-Agent': 'agentrein-sdk-ts', Accept: 'application/json' };
  }

  /** One request; its JSON answer (`null` for 204), or the named error its problem+json describes. */
  async call<T>(method: string, path: string, options: RequestOptions = {}): Promise<T> {
    const response = await this.request(method, this.url(path, options.query), options);
    return (response.status === 204 ? null : await this.answer(response)) as T;
  }

  /** Every item of a list the server answers in pages (a JSON array each, the next one named by the `Link`
   *  header's `rel="next"`, which carries the query). */
  async listed<T>(path: string, query?: Query): Promise<T[]> {
    const items: T[] = [];
    let following: string | null = this.url(path, query);
    while (following !== null) {
      const response = await this.request('GET', following, {});
      items.push(...((await this.answer(response)) as T[]));
      const next = nextLink(response.headers.get('link'));
      following = next === null ? null : new URL(next, following).toString();
    }
    return items;
  }

  /** The answer's JSON. Its body cut off (the server went away while answering: a restart under a long-poll)
   *  is an outage, as a connection that fails before the answer is. */
  private async answer(response: Response): Promise<unknown> {
    try {
      return await response.json();
    } catch (error) {
      if (error instanceof SyntaxError) throw error;
      throw new AgentReinUnavailableError(`AgentRein server ${this.baseUrl} went away while answering: ${describe(error)}`);
    }
  }

  private url(path: string, query?: Query): string {
    const url = new URL(this.baseUrl + path);
    for (const [name, value] of Object.entries(query ?? {})) {
      if (value === undefined) continue;
      for (const one of Array.isArray(value) ? value : [value]) url.searchParams.append(name, String(one));
    }
    return url.toString();
  }

  private async request(method: string, url: string, options: RequestOptions): Promise<Response> {
    const init: RequestInit = { method, headers: { ...this.headers } };
    if (options.body !== undefined) {
      init.body = JSON.stringify(options.body);
      (init.headers as Record<string, string>)['Content-Type'] = 'application/json';
    }
    const attempts = method === 'GET' || options.idempotent ? READ_ATTEMPTS : 1;
    let response: Response | undefined;
    for (let attempt = 1; response === undefined; attempt++) {
      const timeout = AbortSignal.timeout(this.timeoutMs + (options.waitMs ?? 0)); // a bad timeout is no outage
      const signal = options.signal ? AbortSignal.any([timeout, options.signal]) : timeout;
      try {
        response = await (options.background ? unrefFetch(url, init, signal) : fetch(url, { ...init, signal }));
      } catch (error) {
        if (attempt >= attempts || (method !== 'GET' && timeout.aborted)) {
          throw new AgentReinUnavailableError(`AgentRein server ${this.baseUrl} unreachable: ${describe(error)}`);
        }
      }
    }
    if (response.ok) return response;
    let body: unknown = null;
    try {
      body = await response.json();
    } catch {
      // not JSON: the status alone names the error
    }
    throw fromProblem(response.status, body);
  }
}

/** `fetch(url, init)` over a connection of its own whose socket is unref'd: a long-poll made in the background
 *  must not keep an agent's process alive once its work is done (fetch's pooled sockets would). */
function unrefFetch(url: string, init: RequestInit, signal: AbortSignal): Promise<Response> {
  const send = url.startsWith('https:') ? httpsRequest : httpRequest;
  const body = typeof init.body === 'string' ? init.body : undefined;
  const headers = { ...(init.headers as Record<string, string>), ...(body === undefined ? {} : { 'Content-Length': String(Buffer.byteLength(body)) }) };
  return new Promise((resolve, reject) => {
    const request = send(url, { method: init.method ?? 'GET', headers, agent: false, signal }, (answer: IncomingMessage) => {
      const chunks: Buffer[] = [];
      answer.on('data', (chunk: Buffer) => chunks.push(chunk));
      answer.on('error', reject);
      answer.on('end', () => {
        const answered = new Headers();
        for (const [name, value] of Object.entries(answer.headers)) {
          for (const one of Array.isArray(value) ? value : value === undefined ? [] : [value]) answered.append(name, one);
        }
        const status = answer.statusCode ?? 500;
        resolve(new Response(status === 204 ? null : Buffer.concat(chunks), { status, headers: answered }));
      });
    });
    request.on('socket', (socket) => socket.unref());
    request.on('error', reject);
    request.end(body);
  });
}

/** The `rel="next"` target of a `Link` header, if any. */
export function nextLink(header: string | null): string | null {
  for (const part of header?.split(',') ?? []) {
    const match = /<([^>]*)>\s*;(.*)/.exec(part.trim());
    if (match && /rel="?next"?/.test(match[2]!)) return match[1]!;
  }
  return null;
}

/** An id as one path segment: an id with a slash in it must not reach another route. */
export function segment(id: string): string {
  return encodeURIComponent(id);
}

function describe(error: unknown): string {
  if (error instanceof Error) {
    const cause = error.cause instanceof Error ? `: ${error.cause.message}` : '';
    return `${error.message}${cause}`;
  }
  return String(error);
}
