/**
 * The stripe connector for stripe-node (the twin of `agentrein_stripe.connector`; `contract/connectors.json`
 * pins what both derive):
 *
 * - The api name is the Python connector's: the resource path and method in snake case
 *   (`stripe.paymentIntents.create` is `payment_intents.create`, `stripe.invoices.finalizeInvoice` is
 *   `invoices.finalize_invoice`, `stripe.checkout.sessions.create` is `checkout.sessions.create`) and
 *   `stripe.customers.del` is `customers.delete`. Reads (`retrieve`, `list`, `search`, `list*`, `retrieve*`)
 *   and the resources' own helpers pass through unrecorded; only resources and their namespaces are
 *   descended into, never returned data.
 * - Every recorded call carries the action's key as the `idempotencyKey` request option (stripe-node's last
 *   argument, merged with the options the caller gave). `stripe.rawRequest` writes are recorded as
 *   `raw_request METHOD /path`, with the caller's own options (as in Python).
 * - Undos as the Python connector derives them (`INVERSES`); an update is undone by restoring the fields it
 *   changed, read once just before its first attempt; a call on a connected account (`stripeAccount`) is
 *   undone on that account.
 * - Transient: connection errors, rate limits, 5xx, `idempotency_key_in_use` and `lock_timeout`; an
 *   idempotency error is never retried.
 *
 * stripe-node is a peer dependency: nothing here imports it, so `agentrein` loads without it.
 */

import { ValidationError } from '../errors.js';
import type { Connector, Json, OperationType, PreparedCall, UndoConfig } from '../connector.js';
import { mergeUndo, NO_UNDO } from '../undo.js';

/** The oldest stripe-node whose resource methods declare their parameters (request options last). */
export const MIN_STRIPE_MAJOR = 22;
export const STRIPE_DELETE = 'stripe-delete';
export const STRIPE_CANCEL = 'stripe-cancel';
export const STRIPE_REFUND = 'stripe-refund';
export const STRIPE_VOID = 'stripe-void';
export const STRIPE_RESTORE = 'stripe-restore';
const UNDO_TYPES = new Set([STRIPE_DELETE, STRIPE_CANCEL, STRIPE_REFUND, STRIPE_VOID, STRIPE_RESTORE]);

/** How each call is undone; a call not listed here is recorded with undo `none`. */
export const INVERSES: Readonly<Record<string, string>> = {
  'customers.create': STRIPE_DELETE,
  'customers.update': STRIPE_RESTORE,
  'subscriptions.create': STRIPE_CANCEL,
  'subscriptions.update': STRIPE_RESTORE,
  'payment_intents.create': STRIPE_CANCEL, // or a refund, once it has captured money
  'charges.create': STRIPE_REFUND,
  'payment_intents.confirm': STRIPE_REFUND, // money moved when it was confirmed (or captured)
  'payment_intents.capture': STRIPE_REFUND,
  'invoices.create': STRIPE_DELETE,
  'invoices.finalize_invoice': STRIPE_VOID,
  'coupons.create': STRIPE_DELETE,
  'products.create': STRIPE_RESTORE, // deactivated: a product with prices cannot be deleted
  'prices.create': STRIPE_RESTORE, // prices cannot be deleted at all
};
/** The fields an update's undo writes back (others, such as subscription items, are not undone). */
const RESTORABLE: Readonly<Record<string, ReadonlySet<string>>> = {
  customers: new Set(['email', 'name', 'description', 'phone', 'metadata', 'address', 'shipping']),
  subscriptions: new Set(['metadata', 'description', 'cancel_at_period_end', 'days_until_due']),
  products: new Set(['active']),
  prices: new Set(['active']),
};
/** Updates restore what they changed: the object is read just before the update runs. */
const SNAPSHOT_BEFORE = new Set(
  Object.entries(INVERSES)
    .filter(([name, undo]) => undo === STRIPE_RESTORE && name.endsWith('.update'))
    .map(([name]) => name),
);
const READS = new Set(['retrieve', 'list', 'search']);
/** Resource methods that send nothing (`stripe.oauth.authorizeUrl` builds a URL). */
const HELPERS = new Set(['authorizeUrl']);
const OPERATIONS: Readonly<Record<string, OperationType>> = {
  create: 'CREATE',
  update: 'UPDATE',
  delete: 'DELETE',
  cancel: 'DELETE',
  close: 'DELETE',
};
/** stripe-node's method names that are not the Python connector's (`customers.del`). */
const METHOD_NAMES: Readonly<Record<string, string>> = { del: 'delete' };
const TRANSIENT_CODES = new Set(['idempotency_key_in_use', 'lock_timeout']);
const TRANSIENT_TYPES = new Set(['StripeConnectionError', 'StripeRateLimitError']);
const PAYMENT_INTENT_CANCELLABLE = new Set([
  'requires_payment_method',
  'requires_confirmation',
  'requires_action',
  'requires_capture',
]);

type Method = (...args: unknown[]) => Promise<unknown>;
type Fields = { [key: string]: Json };

/** What `prepare` keeps for `undoFor`. */
interface StripeContext {
  readonly resource: string | null;
  readonly objectId: string | null;
  readonly account: string | null;
  before?: Fields;
}

export const stripeConnector: Connector = {
  name: 'stripe',
  // On top of the defaults: client secrets, bank and identity numbers, Stripe Apps secret payloads.
  sensitiveFields: ['clientsecret', 'number', 'routingnumber', 'ssnlast4', 'payload'],
  undoTypes: [STRIPE_DELETE, STRIPE_CANCEL, STRIPE_REFUND, STRIPE_VOID, STRIPE_RESTORE],

  accepts(client: unknown): boolean {
    if (!(isObject(client) && typeof client['rawRequest'] === 'function' && isObject(client['_requestSender']))) return false;
    // Before stripe-node 22 resource methods took `(...args)`: where the request options go cannot be told.
    const version = String((client.constructor as { PACKAGE_VERSION?: unknown }).PACKAGE_VERSION ?? '0');
    if (Number.parseInt(version, 10) < MIN_STRIPE_MAJOR) {
      throw new ValidationError('client', `the stripe connector needs stripe-node ${MIN_STRIPE_MAJOR} or newer, not ${version}`);
    }
    return true;
  },

  descend(value: unknown): boolean {
    return isResource(value) || isNamespace(value);
  },

  prepare(client: unknown, path: readonly string[], args: readonly unknown[]): PreparedCall | null {
    if (path.length === 1 && path[0] === 'rawRequest') return rawRequest(client, args);
    const owner = resolve(client, path.slice(0, -1));
    const last = path[path.length - 1];
    if (path.length < 2 || last === undefined || HELPERS.has(last) || !isResource(owner) || !ownMethod(owner, last)) return null;
    const method = METHOD_NAMES[last] ?? snake(last);
    if (READS.has(method) || method.startsWith('list_') || method.startsWith('retrieve_')) return null;
    const resource = path.slice(0, -1).map(snake).join('.');
    const apiName = `${resource}.${method}`;
    const fn = owner[last] as Method;
    const call = new StripeCall(fn, args);
    const account = call.account ?? clientAccount(client);
    const context: StripeContext = { resource, objectId: call.objectId, account };
    const params = call.params;
    return {
      apiName,
      operationType: OPERATIONS[method] ?? 'OTHER',
      // The connected account in the record too, as the Python connector keeps it (a reviewer reads it there).
      payload: {
        ...(call.objectId === null ? {} : { id: call.objectId }),
        params,
        ...(account === null ? {} : { options: { stripe_account: account } }),
      },
      context,
      async run(idempotencyKey: string): Promise<unknown> {
        // Read once, before the first attempt: a retry after a lost answer would read the update's own effect.
        if (SNAPSHOT_BEFORE.has(apiName) && context.before === undefined) {
          const retrieve = owner['retrieve'] as Method;
          const options = context.account === null ? undefined : { stripeAccount: context.account };
          context.before = asFields(await retrieve.call(owner, call.objectId, undefined, options));
        }
        return call.run(owner, idempotencyKey);
      },
    };
  },

  recordResult(_call: PreparedCall, result: unknown): Json {
    // The result's own fields (nested objects and lists are left out: they can be large).
    return Object.fromEntries(Object.entries(asFields(result)).filter(([, v]) => v === null || typeof v !== 'object'));
  },

  undoFor(call: PreparedCall, result: unknown, override?: { readonly [key: string]: Json }): UndoConfig {
    const context = call.context as StripeContext;
    const kind = INVERSES[call.apiName];
    const data = asFields(result);
    const resource = context.resource ?? '';
    let derived: UndoConfig = NO_UNDO;
    if (kind === undefined) {
      // not undone
    } else if (kind === STRIPE_RESTORE && SNAPSHOT_BEFORE.has(call.apiName)) {
      const changed = call.payload['params'];
      const restore = restored(isFields(changed) ? changed : {}, context.before ?? {}, RESTORABLE[resource] ?? new Set());
      if (Object.keys(restore).length > 0) {
        // An update of nothing restorable (subscription items, say) is not undone.
        derived = { type: STRIPE_RESTORE, params: { resource, id: context.objectId, params: restore } };
      }
    } else if (kind === STRIPE_RESTORE) {
      derived = { type: STRIPE_RESTORE, params: { resource, id: data['id'] ?? null, params: { active: false } } };
    } else if (call.apiName.startsWith('payment_intents.')) {
      derived = paymentIntentUndo(data);
    } else if (kind === STRIPE_REFUND) {
      derived = { type: STRIPE_REFUND, params: { charge: data['id'] ?? null }, requireApproval: true };
    } else {
      const target = kind === STRIPE_VOID ? context.objectId : (data['id'] ?? null);
      derived = { type: kind, params: { resource, id: target } };
    }
    if (context.account !== null && UNDO_TYPES.has(derived.type)) {
      // The undo goes to the connected account the call went to.
      derived = { ...derived, params: { ...derived.params, stripe_account: context.account } };
    }
    return mergeUndo(derived, override);
  },

  isTransient(error: unknown): boolean {
    if (!isObject(error)) return false;
    if (error['type'] === 'StripeIdempotencyError') return false;
    if (typeof error['type'] === 'string' && TRANSIENT_TYPES.has(error['type'])) return true;
    // 409 idempotency_key_in_use arrives as a plain invalid-request error.
    if (typeof error['code'] === 'string' && TRANSIENT_CODES.has(error['code'])) return true;
    return typeof error['statusCode'] === 'number' && error['statusCode'] >= 500;
  },
};

/** A stripe-node resource method's call, `(params?, options?)` or `(id, ..., params?, options?)`: stripe-node
 *  declares every parameter, request options last. */
class StripeCall {
  private readonly optionsAt: number;

  constructor(
    private readonly fn: Method,
    private readonly args: readonly unknown[],
  ) {
    this.optionsAt = Math.max(fn.length - 1, 0);
  }

  get objectId(): string | null {
    const first = this.args[0];
    return typeof first === 'string' ? first : null;
  }

  get options(): Fields {
    const given = this.args[this.optionsAt];
    return isFields(given) ? given : {};
  }

  get account(): string | null {
    const account = this.options['stripeAccount'];
    return typeof account === 'string' ? account : null;
  }

  get params(): Fields {
    const given = this.optionsAt > 0 ? this.args[this.optionsAt - 1] : undefined;
    return isFields(given) ? jsonOf(given) : {};
  }

  run(owner: object, idempotencyKey: string): Promise<unknown> {
    const args = this.args.slice(0, this.optionsAt);
    while (args.length < this.optionsAt) args.push(undefined);
    args[this.optionsAt] = { ...this.options, idempotencyKey };
    return this.fn.apply(owner, args);
  }
}

/** `stripe.rawRequest(method, path, params?, options?)`: a write is recorded (undo `none`). */
/** The connected account a client made with `new Stripe(key, { stripeAccount })` sends every call on (a call's
 *  own `stripeAccount` overrides it); null when it has none. */
function clientAccount(client: unknown): string | null {
  const read = (client as { getApiField?: (field: string) => unknown }).getApiField;
  const account = typeof read === 'function' ? read.call(client, 'stripeAccount') : null;
  return typeof account === 'string' ? account : null;
}

function rawRequest(client: unknown, args: readonly unknown[]): PreparedCall | null {
  const method = String(args[0] ?? '').toUpperCase();
  if (method === 'GET') return null;
  const url = String(args[1] ?? '');
  const params = args[2];
  const send = (client as { rawRequest: Method }).rawRequest;
  const context: StripeContext = { resource: null, objectId: null, account: null };
  return {
    apiName: `raw_request ${method} ${url.split('?')[0]}`,
    operationType: OPERATIONS[method.toLowerCase()] ?? 'OTHER',
    payload: { params: isFields(params) ? jsonOf(params) : {} },
    context,
    run: () => send.apply(client, [...args]),
  };
}

/** A payment intent as a call left it: paid is refunded (after approval), still cancellable is cancelled. */
function paymentIntentUndo(intent: Fields): UndoConfig {
  const status = intent['status'];
  const id = intent['id'] ?? null;
  if (status === 'succeeded') return { type: STRIPE_REFUND, params: { payment_intent: id }, requireApproval: true };
  if (typeof status === 'string' && PAYMENT_INTENT_CANCELLABLE.has(status)) {
    return { type: STRIPE_CANCEL, params: { resource: 'payment_intents', id } };
  }
  return NO_UNDO; // processing or canceled: nothing an API call can take back now
}

/** The values of the restorable fields an update changes, as they were before it; `""` unsets what was unset
 *  (Stripe's way to clear a field or a metadata key). */
function restored(changed: Fields, before: Fields, restorable: ReadonlySet<string>): Fields {
  const restore: Fields = {};
  for (const [field, value] of Object.entries(changed)) {
    if (!restorable.has(field)) continue;
    const old = before[field];
    if (field === 'metadata' && isFields(value)) {
      const previous = isFields(old) ? old : {};
      restore['metadata'] = Object.fromEntries(Object.keys(value).map((k) => [k, previous[k] ?? '']));
    } else {
      restore[field] = old === undefined || old === null ? '' : old;
    }
  }
  return restore;
}

function resolve(client: unknown, path: readonly string[]): unknown {
  let target = client;
  for (const name of path) target = isObject(target) ? target[name] : undefined;
  return target;
}

/** A stripe-node resource (`stripe.customers`): it makes requests. */
function isResource(value: unknown): value is Record<string, unknown> {
  return isObject(value) && typeof value['_makeRequest'] === 'function' && isObject(value['_stripe']);
}

/** A namespace of resources (`stripe.checkout`, `stripe.billing`). */
function isNamespace(value: unknown): boolean {
  return isObject(value) && Object.getPrototypeOf(value)?.constructor?.name === 'ResourceNamespace';
}

/** A method the resource's own class declares (an API method), not one of the base class's helpers. */
function ownMethod(resource: object, name: string): boolean {
  const own = Object.getPrototypeOf(resource) as object | null;
  return own !== null && Object.prototype.hasOwnProperty.call(own, name) && typeof (resource as Record<string, unknown>)[name] === 'function';
}

function snake(name: string): string {
  return name.replace(/[A-Z]/g, (letter) => `_${letter.toLowerCase()}`);
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null;
}

function isFields(value: unknown): value is Fields {
  return isObject(value) && !Array.isArray(value);
}

/** A value as JSON (what the record and the undo store): Stripe's `Decimal` and dates as text. */
function jsonOf(value: object): Fields {
  return JSON.parse(JSON.stringify(value)) as Fields;
}

function asFields(value: unknown): Fields {
  return isFields(value) ? jsonOf(value) : {};
}
