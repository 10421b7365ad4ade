/** The connectors `wrap()` finds by name: `http` built in, the others registered here or by a plugin
 *  (`registerConnector(connector)`, then `wrap(client, session, { connector: connector.name })`). */

import type { Connector } from '../connector.js';
import { ValidationError } from '../errors.js';
import { githubConnector } from './github.js';
import { httpConnector } from './http.js';
import { stripeConnector } from './stripe.js';

const registry = new Map<string, Connector>();

/** Make `connector` available by its name (a second connector of the same name replaces the first). */
export function registerConnector(connector: Connector): void {
  if (typeof connector?.name !== 'string' || !connector.name) {
    throw new ValidationError('connector', 'a connector needs a name');
  }
  registry.set(connector.name, connector);
}

/** The connector registered as `name`; `ValidationError` naming the registered ones otherwise. */
export function connectorNamed(name: string): Connector {
  const found = registry.get(name);
  if (found === undefined) {
    const known = [...registry.keys()].sort().join(', ') || 'none';
    throw new ValidationError('connector', `no connector named '${name}' is registered (registered: ${known})`);
  }
  return found;
}

registerConnector(httpConnector);
registerConnector(stripeConnector);
registerConnector(githubConnector);
