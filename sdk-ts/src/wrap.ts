/**
 * `wrap()`'s proxy (`agentrein._proxy`): the client itself is the Proxy's target, so `wrapped instanceof
 * Stripe` stays true and its type is the client's own. Every method reached from it, at any depth the
 * connector descends (`stripe.subscriptions.cancel`, `octokit.rest.issues.create`), is intercepted: the
 * connector prepares the call (`null`: a read or a helper, called as is) and the guard runs it. Methods are
 * called with the raw object as `this` (class methods with private fields need it); properties that are
 * not functions pass through untouched.
 */

import type { Connector } from './connector.js';
import { guardedCall, type Guard } from './guard.js';

/** `client` wrapped: the same object, seen through the guard. */
export function wrapClient<T>(client: T, guard: Guard): T {
  if (typeof client === 'function') return functionProxy(client as AnyFunction, undefined, guard.bound, [], guard) as T;
  return objectProxy(client as object, guard.bound, [], guard) as T;
}

type AnyFunction = (...args: unknown[]) => unknown;

function objectProxy(target: object, root: unknown, path: readonly string[], guard: Guard): object {
  // The same wrapped value each time it is read (`wrapped.customers === wrapped.customers`).
  const seen = new Map<PropertyKey, { raw: unknown; wrapped: unknown }>();
  return new Proxy(target, {
    get(object, property) {
      const value: unknown = Reflect.get(object, property, object);
      const method = typeof value === 'function';
      if (typeof property === 'symbol' || fixed(object, property)) return value;
      if (!method && !descends(guard.options.connector, value)) return value;
      const known = seen.get(property);
      if (known?.raw === value) return known.wrapped;
      const wrapped = method
        ? functionProxy(value as AnyFunction, object, root, [...path, property], guard)
        : objectProxy(value as object, root, [...path, property], guard);
      seen.set(property, { raw: value, wrapped });
      return wrapped;
    },
  });
}

/** A method (or a callable client such as `fetch`): every call goes through the connector's `prepare`. */
function functionProxy(fn: AnyFunction, owner: object | undefined, root: unknown, path: readonly string[], guard: Guard): AnyFunction {
  // Its own properties are reached through the object proxy (`octokit.paginate.iterator`).
  return new Proxy(objectProxy(fn, root, path, guard) as AnyFunction, {
    apply(_, thisArg, args: unknown[]) {
      const self = owner ?? thisArg; // the raw owner, never the proxy (`this.#private` must resolve)
      let call: ReturnType<Connector['prepare']>;
      try {
        call = guard.options.connector.prepare(root, path, args);
      } catch (error) {
        // As the raw client would answer a call it cannot make (fetch rejects a bad URL): through the promise.
        return Promise.reject(error);
      }
      if (call instanceof Promise) {
        // Described once the service answered (an MCP tool's listing): a promise either way.
        return call.then((prepared) => (prepared === null ? Reflect.apply(fn, self, args) : guardedCall(guard, prepared, path)));
      }
      if (call === null) {
        const result = Reflect.apply(fn, self, args);
        // What a pass-through call returns is guarded too when the connector descends into it (a builder),
        // but never a promise: awaiting one must not look like a call.
        const guarded = descends(guard.options.connector, result) && typeof (result as { then?: unknown }).then !== 'function';
        return guarded ? objectProxy(result, result, [], guard) : result;
      }
      return guardedCall(guard, call, path);
    },
  });
}

function descends(connector: Connector, value: unknown): value is object {
  return typeof value === 'object' && value !== null && connector.descend(value);
}

/** A non-configurable, read-only property must read as itself (a Proxy invariant). */
function fixed(object: object, property: PropertyKey): boolean {
  const own = Object.getOwnPropertyDescriptor(object, property);
  return own !== undefined && own.configurable === false && own.writable === false;
}
