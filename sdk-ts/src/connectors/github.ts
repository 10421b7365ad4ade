/**
 * The github connector for `@octokit/rest` (the twin of `agentrein_github.connector`;
 * `contract/connectors.json` pins what both derive):
 *
 * - A call is known by the REST endpoint it sends (`POST /repos/{owner}/{repo}/issues`), however it is made:
 *   `octokit.rest.issues.create(...)`, the legacy `octokit.issues.create(...)` or
 *   `octokit.request('POST /repos/{owner}/{repo}/issues', ...)`. The endpoints the Python connector names
 *   get its canonical names (`issues.create`, `issues.comments.create`, `labels.add`, `files.update`...);
 *   another write made through an endpoint method is `<scope>.<method>` as Octokit calls it
 *   (`issues.createLabel`), undo `none`; an `octokit.request` write to another endpoint is recorded as the
 *   request it sends (`request POST /repos/{owner}/{repo}/labels`), and an `octokit.graphql` mutation as
 *   `graphql mutation`, both undo `none`. Reads (`GET`, `HEAD`, a graphql query) and `octokit.paginate`
 *   pass through.
 * - GitHub has no idempotency keys: issues and comments carry an invisible marker with the action's key
 *   (`<!-- agentrein:KEY -->`), and a retry first looks for what a lost attempt made (the latest 50 issues,
 *   or the issue's comments); a retry told 422 finds the pull request, ref, repository or file a lost attempt
 *   made by what names it.
 * - Updates are undone as they were found just before the first attempt: the issue's fields it changes, the
 *   labels it had, the file's content.
 * - Transient: network errors, 429 and 500/502/503/504.
 *
 * `@octokit/rest` is a peer dependency: nothing here imports it, so `agentrein` loads without it.
 */

import type { Connector, Json, OperationType, PreparedCall, UndoConfig } from '../connector.js';
import { ValidationError } from '../errors.js';
import { mergeUndo, NO_UNDO } from '../undo.js';

export const CLOSE_ISSUE = 'github-close-issue';
export const RESTORE_ISSUE = 'github-restore-issue';
export const DELETE_COMMENT = 'github-delete-comment';
export const REMOVE_LABELS = 'github-remove-labels';
export const CLOSE_PULL = 'github-close-pull';
export const DELETE_REF = 'github-delete-ref';
export const DELETE_FILE = 'github-delete-file';
export const RESTORE_FILE = 'github-restore-file';
export const DELETE_REPO = 'github-delete-repo';

/** An endpoint the Python connector names: its canonical name, operation type, and the object it acts on
 *  (recorded as the payload's `target`, the API URL the Python connector records). */
interface Known {
  readonly method: string;
  readonly url: string;
  readonly apiName: string;
  readonly operationType: OperationType;
  readonly target: string;
}
const REPO = '/repos/{owner}/{repo}';
const ISSUE = `${REPO}/issues/{issue_number}`;
const KNOWN: readonly Known[] = [
  { method: 'POST', url: `${REPO}/issues`, apiName: 'issues.create', operationType: 'CREATE', target: REPO },
  { method: 'PATCH', url: ISSUE, apiName: 'issues.update', operationType: 'UPDATE', target: ISSUE },
  { method: 'POST', url: `${ISSUE}/comments`, apiName: 'issues.comments.create', operationType: 'CREATE', target: ISSUE },
  { method: 'POST', url: `${ISSUE}/labels`, apiName: 'labels.add', operationType: 'CREATE', target: ISSUE },
  { method: 'DELETE', url: `${ISSUE}/labels/{name}`, apiName: 'labels.remove', operationType: 'DELETE', target: ISSUE },
  { method: 'POST', url: `${REPO}/pulls`, apiName: 'pulls.create', operationType: 'CREATE', target: REPO },
  { method: 'PUT', url: `${REPO}/pulls/{pull_number}/merge`, apiName: 'pulls.merge', operationType: 'OTHER', target: `${REPO}/pulls/{pull_number}` },
  { method: 'POST', url: `${REPO}/git/refs`, apiName: 'git.refs.create', operationType: 'CREATE', target: REPO },
  // files.create, or files.update when it names the blob it replaces (`sha`)
  { method: 'PUT', url: `${REPO}/contents/{path}`, apiName: 'files.create', operationType: 'CREATE', target: REPO },
  { method: 'POST', url: '/user/repos', apiName: 'repos.create', operationType: 'CREATE', target: '/user' },
  { method: 'POST', url: '/orgs/{org}/repos', apiName: 'repos.create', operationType: 'CREATE', target: '/orgs/{org}' },
  { method: 'DELETE', url: REPO, apiName: 'repos.delete', operationType: 'DELETE', target: REPO },
];
const ISSUE_FIELDS = ['title', 'body', 'state', 'labels', 'assignees'] as const;
const TRANSIENT_STATUSES = new Set([429, 500, 502, 503, 504]);
/** How many of the newest issues a retry searches for the marker of a lost attempt (as in Python). */
const RECENT_ISSUES = 50;
/** The payload key recording the API URL of the object a call was made on (as the Python connector does). */
const TARGET = 'target';

type Fields = { [key: string]: Json };
type Send = (params: Fields) => Promise<OctokitResponse>;
interface OctokitResponse {
  readonly status: number;
  readonly url: string;
  readonly headers: { readonly [key: string]: unknown };
  readonly data: unknown;
}
/** What of an Octokit this connector uses: reads it makes itself (never through the wrapped client). */
interface OctokitLike {
  request(route: string, params?: Fields): Promise<OctokitResponse>;
  paginate(route: string, params?: Fields): Promise<unknown[]>;
}

/** What `prepare` keeps for `run` and `undoFor`. */
interface GitHubContext {
  readonly params: Fields;
  /** The values of the endpoint's URL variables, written into the URL or given as parameters. */
  readonly values: Record<string, string>;
  /** `owner/name` of the repository the call acts on, when it acts on one. */
  readonly repo: string | null;
  attempts: number;
  /** Whether what the undo restores was read (a read that failed is made again by the retry). */
  readBefore: boolean;
  before?: Json;
}

export const githubConnector: Connector = {
  name: 'github',
  // Secrets set through the API (`createOrUpdateRepoSecret`), on top of the default list.
  sensitiveFields: ['unencryptedvalue', 'encryptedvalue'],
  undoTypes: [
    CLOSE_ISSUE,
    RESTORE_ISSUE,
    DELETE_COMMENT,
    REMOVE_LABELS,
    CLOSE_PULL,
    DELETE_REF,
    DELETE_FILE,
    RESTORE_FILE,
    DELETE_REPO,
  ],

  /** An Octokit made without `@octokit/plugin-retry` (part of the `octokit` package's Octokit): that plugin
   *  retries a create whose answer was lost without looking for what it made, so GitHub would get it twice
   *  (as the Python connector refuses a PyGithub client that retries). */
  accepts(client: unknown): boolean {
    if (!(isObject(client) && isEndpoint(client['request']) && typeof client['paginate'] === 'function' && isObject(client['rest']))) {
      return false;
    }
    if (isObject(client['retry']) && typeof client['retry']['retryRequest'] === 'function') {
      throw new ValidationError(
        'client',
        "make the Octokit from @octokit/rest, without @octokit/plugin-retry: it retries a create whose answer was lost, which makes an issue twice; AgentRein retries the calls you list in `retryable` safely",
      );
    }
    return true;
  },

  descend(value: unknown): boolean {
    // `octokit.rest`, `octokit.rest.issues`, `octokit.issues`: never a response or its data.
    return isScope(value) || (isObject(value) && !Array.isArray(value) && Object.values(value).some(isScope));
  },

  prepare(client: unknown, path: readonly string[], args: readonly unknown[]): PreparedCall | null {
    const octokit = client as OctokitLike & Record<string, unknown>;
    const sent = described(octokit, path, args);
    if (sent === null || sent.method === 'GET' || sent.method === 'HEAD') return null;
    const match = matchKnown(sent.method, sent.url, sent.params);
    const values = match?.values ?? {};
    const repo = values['owner'] !== undefined && values['repo'] !== undefined ? `${values['owner']}/${values['repo']}` : null;
    let apiName = match?.known.apiName ?? unknownCallName(path, sent);
    let operationType: OperationType = match?.known.operationType ?? 'OTHER';
    if (apiName === 'files.create' && sent.params['sha'] !== undefined) [apiName, operationType] = ['files.update', 'UPDATE'];
    const context: GitHubContext = { params: sent.params, values, repo, attempts: 0, readBefore: false };
    const payload: Fields = { ...sent.params };
    if (match !== null) payload[TARGET] = baseUrl(octokit) + fill(match.known.target, values);
    return {
      apiName,
      operationType,
      payload,
      context,
      async run(key: string): Promise<unknown> {
        context.attempts += 1;
        const retry = context.attempts > 1;
        if (!context.readBefore) {
          // Just before the call (after any approval), once: a retry would read the lost attempt's effect.
          const before = await readBefore(octokit, apiName, values, sent.params);
          if (before !== undefined) context.before = before;
          context.readBefore = true;
        }
        if (apiName === 'issues.create' || apiName === 'issues.comments.create') {
          return createOnce(octokit, sent.send, apiName, values, sent.params, key, retry);
        }
        try {
          return await sent.send(sent.params);
        } catch (error) {
          // A retry told "already exists": the lost attempt made it; answer with what it made.
          const made = retry && status(error) === 422 ? await madeByLostAttempt(octokit, apiName, values, sent.params) : null;
          if (made === null) throw error;
          return made;
        }
      },
    };
  },

  recordResult(_call: PreparedCall, result: unknown): Json {
    return Object.fromEntries(Object.entries(dataOf(result)).filter(([, v]) => v === null || typeof v !== 'object'));
  },

  undoFor(call: PreparedCall, result: unknown, override?: { readonly [key: string]: Json }): UndoConfig {
    const { params, values, repo, before } = call.context as GitHubContext;
    const data = dataOf(result);
    const issue = Number(values['issue_number'] ?? params['issue_number']);
    let derived: UndoConfig = NO_UNDO;
    switch (call.apiName) {
      case 'issues.create':
        derived = { type: CLOSE_ISSUE, params: { repo, number: data['number'] ?? null } };
        break;
      case 'issues.update':
        derived = { type: RESTORE_ISSUE, params: { repo, number: issue, fields: before ?? {} } };
        break;
      case 'issues.comments.create':
        derived = { type: DELETE_COMMENT, params: { repo, id: data['id'] ?? null } };
        break;
      case 'labels.add': {
        const had = new Set(Array.isArray(before) ? before : []);
        const labels = labelNames(params['labels']).filter((label) => !had.has(label));
        derived = { type: REMOVE_LABELS, params: { repo, number: issue, labels } };
        break;
      }
      case 'pulls.create':
        derived = { type: CLOSE_PULL, params: { repo, number: data['number'] ?? null } };
        break;
      case 'git.refs.create':
        derived = { type: DELETE_REF, params: { repo, ref: data['ref'] ?? null } };
        break;
      case 'files.create':
      case 'files.update': {
        const target: Fields = { repo, path: String(values['path'] ?? params['path']), branch: typeof params['branch'] === 'string' ? params['branch'] : null };
        derived = call.apiName === 'files.create' ? { type: DELETE_FILE, params: target } : { type: RESTORE_FILE, params: { ...target, content: before ?? null } };
        break;
      }
      case 'repos.create':
        derived = { type: DELETE_REPO, params: { repo: data['full_name'] ?? null }, requireApproval: true };
        break;
    }
    return mergeUndo(derived, override);
  },

  isTransient(error: unknown): boolean {
    // fetch's own network failures are TypeErrors; Octokit reports them as a RequestError of status 500.
    if (error instanceof TypeError) return true;
    const code = status(error);
    return code !== null && TRANSIENT_STATUSES.has(code);
  },
};

/** A call as the request it sends: its method, URL template, parameters and how to send it again. */
interface Sent {
  readonly method: string;
  readonly url: string;
  readonly params: Fields;
  readonly send: Send;
}

/** The name of a write the Python connector does not name: Octokit's `<scope>.<method>` for an endpoint method,
 *  else the request it sends (`request POST /repos/{owner}/{repo}/labels`, `graphql mutation`). */
function unknownCallName(path: readonly string[], sent: Sent): string {
  if (path[0] === 'graphql') return 'graphql mutation';
  if (path[0] === 'request') return `request ${sent.method} ${sent.url.replace(/^https?:\/\/[^/]+/, '').split('?')[0]}`;
  return path.filter((name) => name !== 'rest').join('.');
}

/** Whether a GraphQL document holds a mutation (one that only queries changes nothing). */
function isMutation(document: string): boolean {
  const code = document.replace(/#[^\n]*/g, '').replace(/"""[\s\S]*?"""|"(?:[^"\\]|\\.)*"/g, '""');
  return /(^|\})\s*mutation\b/.test(code);
}

function described(octokit: OctokitLike & Record<string, unknown>, path: readonly string[], args: readonly unknown[]): Sent | null {
  if (path.length === 1 && path[0] === 'graphql') {
    // octokit.graphql(document, variables) or octokit.graphql({ query, ...variables })
    const graphql = octokit['graphql'] as unknown as (query: unknown, variables?: unknown) => Promise<OctokitResponse>;
    const document = typeof args[0] === 'string' ? args[0] : String(fields(args[0])['query'] ?? '');
    const params: Fields = typeof args[0] === 'string' ? { query: document, ...fields(args[1]) } : fields(args[0]);
    const method = isMutation(document) ? 'POST' : 'GET'; // a query is a read, whatever it is sent with
    return { method, url: '/graphql', params, send: () => graphql(args[0], args[1]) };
  }
  if (path.length === 1 && path[0] === 'request') {
    // octokit.request('POST /repos/{owner}/{repo}/issues', params) or octokit.request({ method, url, ...params })
    const route = args[0];
    if (typeof route === 'string') {
      const [method, url] = route.includes(' ') ? route.split(' ', 2) : ['GET', route];
      return { method: (method ?? 'GET').toUpperCase(), url: url ?? '', params: fields(args[1]), send: (p) => octokit.request(route, p) };
    }
    const options = fields(route);
    const request = octokit['request'] as unknown as (options: Fields) => Promise<OctokitResponse>;
    return { method: String(options['method'] ?? 'GET').toUpperCase(), url: String(options['url'] ?? ''), params: options, send: (p) => request(p) };
  }
  let target: unknown = octokit;
  for (const name of path) target = isObject(target) || typeof target === 'function' ? (target as Record<string, unknown>)[name] : undefined;
  if (!isEndpoint(target)) return null; // paginate, graphql, hook, log...
  const defaults = target.endpoint.DEFAULTS;
  const method = target as unknown as (params: Fields) => Promise<OctokitResponse>;
  return { method: defaults.method.toUpperCase(), url: defaults.url, params: fields(args[0]), send: (p) => method(p) };
}

/** The known endpoint `method url` is, with the values of its URL's variables (from the URL when the caller
 *  wrote them in, else from the parameters). */
function matchKnown(method: string, url: string, params: Fields): { known: Known; values: Record<string, string> } | null {
  const path = url.replace(/^https?:\/\/[^/]+/, '').split('?')[0] ?? '';
  for (const known of KNOWN) {
    if (known.method !== method) continue;
    const names: string[] = [];
    const pattern = known.url.replace(/\{(\w+)\}/g, (_, name: string) => {
      names.push(name);
      return name === 'path' ? '(.+)' : '([^/]+)';
    });
    const found = new RegExp(`^${pattern}$`).exec(path);
    if (found === null) continue;
    const values: Record<string, string> = {};
    names.forEach((name, i) => {
      const written = found[i + 1] ?? '';
      values[name] = written === `{${name}}` ? String(params[name] ?? '') : decodeURIComponent(written);
    });
    return { known, values };
  }
  return null;
}

/** What the undo needs read before the call changes it (once: a retry would read its own effect). */
async function readBefore(octokit: OctokitLike, apiName: string, values: Record<string, string>, params: Fields): Promise<Json | undefined> {
  if (apiName === 'issues.update' || apiName === 'labels.add') {
    const { data } = await octokit.request(`GET ${ISSUE}`, { ...values });
    const issue = fields(data);
    if (apiName === 'labels.add') return labelNames(issue['labels']);
    const current: Fields = {
      title: issue['title'] ?? null,
      body: issue['body'] ?? '',
      state: issue['state'] ?? null,
      labels: labelNames(issue['labels']),
      assignees: (Array.isArray(issue['assignees']) ? issue['assignees'] : []).map((user) => fields(user)['login'] ?? null),
    };
    return Object.fromEntries(ISSUE_FIELDS.filter((field) => field in params).map((field) => [field, current[field] ?? null]));
  }
  if (apiName === 'files.update') {
    const file = await readFile(octokit, values, params);
    return file === null ? null : file.toString('base64');
  }
  return undefined;
}

/** Create an issue or comment carrying an invisible marker of `key`; a retry first looks for the one a lost
 *  attempt made (GitHub has no idempotency keys). */
async function createOnce(
  octokit: OctokitLike,
  send: Send,
  apiName: string,
  values: Record<string, string>,
  params: Fields,
  key: string,
  retry: boolean,
): Promise<unknown> {
  const marker = `<!-- agentrein:${key} -->`;
  if (retry) {
    // Issues newest first, the latest 50; an issue's comments come oldest first, so all of them.
    const recent =
      apiName === 'issues.create'
        ? (await octokit.request(`GET ${REPO}/issues`, { ...values, state: 'all', sort: 'created', direction: 'desc', per_page: RECENT_ISSUES })).data
        : await octokit.paginate(`GET ${ISSUE}/comments`, { ...values, per_page: 100 });
    const made = (Array.isArray(recent) ? recent : []).find((item) => String(fields(item)['body'] ?? '').includes(marker));
    if (made !== undefined) return { status: 200, url: '', headers: {}, data: made };
  }
  const body = params['body'];
  return send({ ...params, body: typeof body === 'string' && body ? `${body}\n\n${marker}` : marker });
}

/** What an earlier attempt of a pull request, ref, repository or file create made, found by what names it
 *  (only what matches the call: a human's pull request or ref of the same name is not taken for its own). */
async function madeByLostAttempt(octokit: OctokitLike, apiName: string, values: Record<string, string>, params: Fields): Promise<unknown> {
  try {
    if (apiName === 'pulls.create') {
      const query = { ...values, state: 'open', base: params['base'] ?? null, head: `${values['owner']}:${String(params['head'])}` };
      const { data } = await octokit.request(`GET ${REPO}/pulls`, query);
      const pull = (Array.isArray(data) ? data : []).find((p) => fields(p)['title'] === params['title']);
      return pull === undefined ? null : { status: 200, url: '', headers: {}, data: pull };
    }
    if (apiName === 'git.refs.create') {
      const ref = String(params['ref']).replace(/^refs\//, '');
      const found = await octokit.request(`GET ${REPO}/git/ref/{ref}`, { ...values, ref });
      return fields(fields(found.data)['object'])['sha'] === params['sha'] ? found : null;
    }
    if (apiName === 'repos.create') {
      const owner = values['org'] ?? String(fields((await octokit.request('GET /user')).data)['login']);
      return await octokit.request(`GET ${REPO}`, { owner, repo: String(params['name']) });
    }
    if (apiName === 'files.create') {
      const file = await readFile(octokit, values, params);
      const wanted = Buffer.from(String(params['content'] ?? ''), 'base64');
      return file !== null && file.equals(wanted) ? { status: 200, url: '', headers: {}, data: {} } : null;
    }
  } catch (error) {
    if (status(error) === null) throw error; // not GitHub's answer: let it be seen
  }
  return null;
}

async function readFile(octokit: OctokitLike, values: Record<string, string>, params: Fields): Promise<Buffer | null> {
  const query: Fields = { owner: values['owner'] ?? '', repo: values['repo'] ?? '', path: String(values['path'] ?? params['path']) };
  if (typeof params['branch'] === 'string') query['ref'] = params['branch'];
  const { data } = await octokit.request(`GET ${REPO}/contents/{path}`, query);
  const file = fields(data);
  // Files over 1 MB come without their content (`encoding: "none"`): no restore could be made from that.
  if (typeof file['content'] === 'string' && file['encoding'] !== 'base64') {
    throw new ValidationError('path', `GitHub gives no content for ${String(query['path'])} (over 1 MB?): it could not be restored`);
  }
  return typeof file['content'] === 'string' ? Buffer.from(file['content'], 'base64') : null;
}

/** Label names as given (`['bug']` or `[{ name: 'bug' }]`) or as GitHub answers them. */
function labelNames(labels: Json | undefined): string[] {
  if (!Array.isArray(labels)) return [];
  return labels.map((label) => (typeof label === 'string' ? label : String(fields(label)['name'] ?? '')));
}

function fill(template: string, values: Record<string, string>): string {
  return template.replace(/\{(\w+)\}/g, (whole, name: string) => values[name] ?? whole);
}

function baseUrl(octokit: Record<string, unknown>): string {
  const request = octokit['request'];
  return isEndpoint(request) ? String(request.endpoint.DEFAULTS.baseUrl ?? '') : '';
}

interface EndpointFunction {
  readonly endpoint: { readonly DEFAULTS: { readonly method: string; readonly url: string; readonly baseUrl?: string } };
}

/** An Octokit endpoint method (`octokit.rest.issues.create`, `octokit.request`): it knows its request. */
function isEndpoint(value: unknown): value is EndpointFunction {
  if (typeof value !== 'function') return false;
  const endpoint = (value as unknown as Record<string, unknown>)['endpoint'];
  return (typeof endpoint === 'function' || isObject(endpoint)) && isObject((endpoint as unknown as Record<string, unknown>)['DEFAULTS']);
}

/** A scope of endpoint methods (`octokit.rest.issues`). */
function isScope(value: unknown): boolean {
  return isObject(value) && !Array.isArray(value) && Object.values(value).some(isEndpoint);
}

function status(error: unknown): number | null {
  return isObject(error) && typeof error['status'] === 'number' ? error['status'] : null;
}

function dataOf(result: unknown): Fields {
  return isObject(result) ? fields(result['data']) : {};
}

function fields(value: unknown): Fields {
  return isObject(value) && !Array.isArray(value) ? (value as Fields) : {};
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null;
}
