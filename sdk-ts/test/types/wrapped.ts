/**
 * Compiled by `tsc --noEmit` (`npm run typecheck`), never run: wrapped clients keep their own types, and
 * misuse of the SDK's API does not compile (each `@ts-expect-error` fails the build if the line compiles).
 */

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { Octokit } from '@octokit/rest';
import Stripe from 'stripe';

import { AgentRein, httpConnector, type ActionStatus, type Session } from '../../src/index.js';

declare const agentrein: AgentRein;
declare const session: Session;

export async function stripeKeepsItsTypes(stripeClient: Stripe, email: string): Promise<void> {
  const agentStripe = agentrein.wrap(stripeClient, session, {
    connector: 'stripe',
    requiresApproval: ['subscriptions.cancel', 'customers.del'],
    pollIntervalMs: 2000,
    timeoutMs: 300000,
    retryable: ['customers.create'],
    failureMode: 'open',
  });
  const c: Stripe.Customer = await agentStripe.customers.create({ email });
  const stillStripe: Stripe = agentStripe;
  // @ts-expect-error: a customer is not a subscription
  const wrong: Stripe.Subscription = await agentStripe.customers.create({ email });
  void [c, stillStripe, wrong];
}

export async function octokitKeepsItsTypes(octokit: Octokit): Promise<void> {
  const gh = agentrein.wrap(octokit, session, { connector: 'github' });
  const issue = await gh.rest.issues.create({ owner: 'octo', repo: 'hello', title: 'Broken' });
  const issueNumber: number = issue.data.number;
  const comment = await gh.issues.createComment({ owner: 'octo', repo: 'hello', issue_number: issueNumber, body: 'on it' });
  const commentId: number = comment.data.id;
  // @ts-expect-error: an issue's title is a string, its number is not
  const title: number = issue.data.title;
  void [commentId, title];
}

export async function fetchKeepsItsTypes(): Promise<void> {
  const api = agentrein.wrap(fetch, session, {
    connector: 'http',
    undo: { 'POST /v1/things': { type: 'http-delete', url: 'http://127.0.0.1:1/v1/things/1' } },
  });
  const answer: Response = await api('http://127.0.0.1:1/v1/things', { method: 'POST' });
  void answer;
}

export function connectorsAreRegisteredOnTheClient(): AgentRein {
  agentrein.registerConnector({ ...httpConnector, name: 'shop' });
  // @ts-expect-error: a connector is an object, not its name
  agentrein.registerConnector('shop');
  // @ts-expect-error: connectors is a list of connectors
  void new AgentRein({ connectors: ['shop'] });
  return new AgentRein({ connectors: [{ ...httpConnector, name: 'shop' }] });
}

export async function misuseDoesNotCompile(): Promise<void> {
  // @ts-expect-error: failureMode is 'open' or 'closed'
  agentrein.wrap(fetch, session, { connector: 'http', failureMode: 'sometimes' });
  // @ts-expect-error: a connector is needed
  agentrein.wrap(fetch, session, { requiresApproval: ['POST *'] });
  // @ts-expect-error: a session needs its agentId
  await agentrein.newSession({ intent: 'no agent' });
  // @ts-expect-error: no such approval status
  await agentrein.listApprovals({ status: 'WAITING' });
  // @ts-expect-error: no such policy effect
  await agentrein.addPolicy({ name: 'p', effect: 'DENY' });
  // @ts-expect-error: no such action status
  const status: ActionStatus = 'DONE';
  const displayed: Session['displayStatus'] = (await agentrein.getSession(session)).displayStatus;
  // @ts-expect-error: a display status is not a stored action status
  const asAction: ActionStatus = displayed;
  void [status, asAction];
}

export async function mcpClientKeepsItsTypes(client: Client): Promise<void> {
  const memory = agentrein.wrap(client, session, {
    connector: 'mcp',
    server: 'memory',
    requiresApproval: ['delete_*'],
    retryable: ['create_*'],
    undo: { tools: { create_entities: { undo: 'none' } } },
    onToolError: 'record',
  });
  const stillClient: Client = memory;
  const result = await memory.callTool({ name: 'create_entities', arguments: { entities: [] } });
  const tools = await memory.listTools();
  const firstTool: string | undefined = tools.tools[0]?.name;
  const fromFile = agentrein.wrap(client, session, { connector: 'mcp', undo: 'tables/memory.json' });
  // @ts-expect-error: a tool error is rolled back or recorded, nothing else
  agentrein.wrap(client, session, { connector: 'mcp', onToolError: 'ignore' });
  // @ts-expect-error: a tool is called by its name
  await memory.callTool({ arguments: {} });
  void [stillClient, result, firstTool, fromFile];
}
