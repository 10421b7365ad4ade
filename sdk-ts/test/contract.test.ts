/**
 * The TypeScript connectors keep the shared contract (contract/connectors.json), the one the Python connectors
 * keep too (tests/test_contract_shared.py): every call in the fixture, made as a TypeScript user writes it
 * through the real stripe-node, Octokit and fetch against the loopback fakes, gets the canonical name,
 * operation type and undo config the fixture says, and every injected fault is or is not worth retrying as
 * it says.
 */

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

import { Octokit } from '@octokit/rest';
import Stripe from 'stripe';

import type { Connector, Json } from '../src/connector.js';
import { connectorNamed } from '../src/connectors/index.js';
import { useHarness } from './harness.js';

type Fields = { [key: string]: Json };
type ConnectorName = 'stripe' | 'github' | 'http';
interface Form {
  readonly path: string[];
  readonly args?: Json[];
}
interface Step {
  readonly as: string;
  readonly method: string;
  readonly path: string;
  readonly body?: Fields;
}
interface Case {
  readonly name: string;
  readonly connector: ConnectorName;
  readonly given?: Step[];
  readonly typescript: Form[];
  readonly apiName: string | null;
  readonly operationType?: string;
  readonly payload?: Fields;
  readonly run?: boolean;
  readonly answer?: Fields;
  readonly keyed?: boolean;
  readonly sent?: Fields;
  readonly undo?: Fields;
}
interface Fault {
  readonly connector: ConnectorName;
  readonly fault: { method: string; path: string; status: number | null; code?: string; type?: string };
  readonly transient: boolean;
}
interface Contract {
  readonly worlds: {
    stripe: { apiKey: string };
    github: { token: string; login: string; repos: { owner: string; name: string; files: Fields }[] };
  };
  readonly cases: Case[];
  readonly faults: Fault[];
  readonly faultCalls: Record<string, { typescript: Form }>;
  readonly sensitiveFields: Record<string, string[]>;
  readonly undoTypes: Record<string, string[]>;
}

const ROOT = resolve(fileURLToPath(import.meta.url), '../../../..');
const CONTRACT = JSON.parse(readFileSync(resolve(ROOT, 'contract/connectors.json'), 'utf8')) as Contract;
const WORLDS = CONTRACT.worlds;
/** `{result.id}`, `{customer.id}`, `{main.commit.sha}`, `{run}`, `{key}`, `{fake}` (contract/README.md) */
const PLACEHOLDER = /\{(run|key|fake|[A-Za-z_]+(?:\.[A-Za-z_]+)+)\}/g;

const harness = useHarness();

let seeded: Promise<void> | undefined;

/** The contract's world, on top of what the harness seeds (once, by the first test that needs it). */
function world(): Promise<void> {
  seeded ??= (async () => {
    const github = WORLDS.github;
    await harness().fake('github', 'add_user', [github.login], { token: github.token });
    for (const repo of github.repos) await harness().fake('github', 'add_repo', [repo.owner, repo.name], { files: repo.files });
  })();
  return seeded;
}

/** What placeholders stand for in one run of one call form. */
class Values {
  readonly named: Record<string, Json> = {};

  constructor(fake: string) {
    this.named['run'] = Math.random().toString(16).slice(2, 10);
    this.named['key'] = `contract-${crypto.randomUUID()}`;
    this.named['fake'] = fake;
  }

  /** `value` with its placeholders replaced: a string that is one placeholder takes the value's own type. */
  resolve<T extends Json | undefined>(value: T): T {
    if (Array.isArray(value)) return value.map((v) => this.resolve(v)) as T;
    if (typeof value === 'object' && value !== null) {
      return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, this.resolve(v)])) as T;
    }
    if (typeof value !== 'string') return value;
    const whole = new RegExp(`^${PLACEHOLDER.source}$`).exec(value);
    if (whole) return this.lookup(whole[1]!) as T;
    return value.replace(PLACEHOLDER, (_, name: string) => String(this.lookup(name))) as T;
  }

  private lookup(name: string): Json {
    let value: Json | undefined = this.named;
    for (const part of name.split('.')) {
      assert.ok(typeof value === 'object' && value !== null && !Array.isArray(value), `no value for {${name}}`);
      value = value[part];
    }
    assert.ok(value !== undefined, `no value for {${name}}`);
    return value;
  }
}

function fakeUrl(connector: ConnectorName): string {
  const peers = harness().peers;
  return { stripe: peers.stripeUrl, github: peers.githubUrl, http: peers.serviceUrl }[connector];
}

function clientFor(connector: ConnectorName): unknown {
  if (connector === 'http') return fetch;
  const url = new URL(fakeUrl(connector));
  if (connector === 'stripe') {
    return new Stripe(WORLDS.stripe.apiKey, { host: url.hostname, port: Number(url.port), protocol: 'http', maxNetworkRetries: 0 });
  }
  return new Octokit({ auth: WORLDS.github.token, baseUrl: url.origin });
}

/** The contract's `given` steps, sent as plain HTTP (no connector in the way). */
async function given(connector: ConnectorName, steps: readonly Step[], values: Values): Promise<void> {
  for (const step of steps) {
    const body = values.resolve(step.body);
    const init: RequestInit = { method: step.method, headers: {} };
    if (connector === 'stripe') {
      init.headers = { Authorization: `Bearer ${WORLDS.stripe.apiKey}`, 'Content-Type': 'application/x-www-form-urlencoded' };
      init.body = new URLSearchParams(Object.entries(body ?? {}).map(([k, v]): [string, string] => [k, String(v)])).toString();
    } else {
      init.headers = { 'Content-Type': 'application/json', ...(connector === 'github' ? { Authorization: `token ${WORLDS.github.token}` } : {}) };
      if (body !== undefined) init.body = JSON.stringify(body);
    }
    const answer = await fetch(fakeUrl(connector) + values.resolve(step.path), init);
    const data = (await answer.json()) as Json;
    assert.ok(answer.ok, `${step.method} ${step.path}: ${JSON.stringify(data)}`);
    values.named[step.as] = data;
  }
}

/** What the service answered, as JSON: a Stripe object, an Octokit response's data, a fetch response's body. */
async function answerOf(connector: ConnectorName, result: unknown): Promise<Json> {
  if (connector === 'http') return (await (result as Response).json()) as Json;
  const data = connector === 'github' ? (result as { data: unknown }).data : result;
  return JSON.parse(JSON.stringify(data)) as Json;
}

async function keysSent(connector: ConnectorName): Promise<(string | null)[]> {
  const calls = await harness().fake<{ idempotency_key: string | null }[]>(connector === 'stripe' ? 'stripe' : 'service', 'calls');
  return calls.map((call) => call.idempotency_key);
}

async function bodiesSent(): Promise<unknown[]> {
  const calls = await harness().fake<{ body: unknown }[]>('github', 'calls', ['POST']);
  return calls.map((call) => call.body);
}

function contains(body: unknown, expected: Fields): boolean {
  return typeof body === 'object' && body !== null && Object.entries(expected).every(([k, v]) => (body as Fields)[k] === v);
}

for (const contractCase of CONTRACT.cases) {
  contractCase.typescript.forEach((form, n) => {
    test(`each TypeScript call derives what the shared contract says: ${contractCase.name} / typescript ${n + 1}`, async () => {
      const { connector: name } = contractCase;
      const connector: Connector = connectorNamed(name);
      await world();
      const values = new Values(fakeUrl(name));
      await given(name, contractCase.given ?? [], values);
      const client = clientFor(name);
      assert.ok(connector.accepts(client));
      const prepared = await connector.prepare(client, form.path, values.resolve(form.args ?? []));
      if (contractCase.apiName === null) {
        assert.equal(prepared, null, `a read was recorded as ${prepared?.apiName}`);
        return;
      }
      assert.ok(prepared !== null, 'a write was let through unrecorded');
      assert.deepEqual([prepared.apiName, prepared.operationType], [values.resolve(contractCase.apiName), contractCase.operationType]);
      const pinned = values.resolve(contractCase.payload ?? {});
      const recorded = Object.fromEntries(Object.keys(pinned).map((k) => [k, prepared.payload[k] ?? null]));
      assert.deepEqual(recorded, pinned, "the payload lacks what the server's words read");
      if (contractCase.run === false) return;
      const keysBefore = (await keysSent(name)).length;
      const bodiesBefore = (await bodiesSent()).length;
      const key = String(values.named['key']);
      const result = await prepared.run(key);
      values.named['result'] = await answerOf(name, result);
      const answer = values.named['result'] as Fields;
      for (const [field, expected] of Object.entries(contractCase.answer ?? {})) {
        assert.equal(answer[field], expected, `the fake answered ${field}=${JSON.stringify(answer[field])}`);
      }
      if (name !== 'github' && contractCase.keyed !== false) {
        assert.ok((await keysSent(name)).slice(keysBefore).includes(key), 'the idempotency key never arrived');
      }
      if (contractCase.sent !== undefined) {
        const sent = values.resolve(contractCase.sent);
        assert.ok((await bodiesSent()).slice(bodiesBefore).some((body) => contains(body, sent)), 'GitHub never got it');
      }
      const undo = connector.undoFor(prepared, result);
      const got = { type: undo.type, params: undo.params, requireApproval: undo.requireApproval ?? false };
      assert.deepEqual(got, values.resolve({ requireApproval: false, ...contractCase.undo }));
    });
  });
}

for (const fault of CONTRACT.faults) {
  const { status, code } = fault.fault;
  test(`each injected fault is worth retrying as the shared contract says: ${fault.connector} ${status ?? 'dropped'} ${code ?? ''}`.trim(), async () => {
    const connector = connectorNamed(fault.connector);
    await world();
    const values = new Values(fakeUrl(fault.connector));
    const form = CONTRACT.faultCalls[fault.connector]!.typescript;
    const prepared = await connector.prepare(clientFor(fault.connector), form.path, values.resolve(form.args ?? []));
    assert.ok(prepared !== null);
    // stripe-node retries a closed connection once by itself (under the same key), whatever maxNetworkRetries says.
    const times = fault.connector === 'stripe' && status === null ? 2 : 1;
    const kwargs = { times, ...(fault.connector === 'stripe' ? { code: code ?? null, error_type: fault.fault.type ?? null } : {}) };
    await harness().fake(fault.connector === 'http' ? 'service' : fault.connector, 'fail_next', [fault.fault.method, fault.fault.path, status], kwargs);
    const error = await prepared.run(String(values.named['key'])).then(
      () => assert.fail('the call succeeded despite the fault'),
      (raised: unknown) => raised,
    );
    assert.equal(connector.isTransient(error), fault.transient, String(error));
  });
}

for (const [name, fields] of Object.entries(CONTRACT.sensitiveFields)) {
  test(`each connector redacts the fields the shared contract lists: ${name}`, () => {
    assert.deepEqual([...connectorNamed(name).sensitiveFields].sort(), [...fields].sort());
  });
}

for (const [name, types] of Object.entries(CONTRACT.undoTypes)) {
  test(`each connector runs the undo types the shared contract lists: ${name}`, () => {
    assert.deepEqual([...connectorNamed(name).undoTypes].sort(), [...types].sort());
  });
}

