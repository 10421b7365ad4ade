/** The built-in connectors, and the process-wide defaults every `AgentRein`'s own registry falls back to. */

import type { Connector } from '../connector.js';
import { ConnectorRegistry } from '../registry.js';
import { githubConnector } from './github.js';
import { httpConnector } from './http.js';
import { mcpConnector } from './mcp.js';
import { stripeConnector } from './stripe.js';

/** What every client finds by name unless it registered its own of that name: the built-in connectors,
 *  registered here as a plugin's would be, and those of the deprecated `registerConnector` (a later one of
 *  a name replaces the earlier, built-in or not, for every client, as it always did). */
export const defaultConnectors = new ConnectorRegistry();
for (const connector of [httpConnector, stripeConnector, githubConnector, mcpConnector]) defaultConnectors.register(connector);

/** Make `connector` available by its name to every `AgentRein` of the process (a second connector of the
 *  same name replaces the first).
 *  @deprecated Register it on the client that uses it: `agentrein.registerConnector(connector)` or
 *  `new AgentRein({ connectors: [connector] })`, which no other client sees. */
export function registerConnector(connector: Connector): void {
  defaultConnectors.register(connector);
}

/** The connector of the defaults registered as `name`; `ValidationError` naming the registered ones otherwise.
 *  @deprecated A client finds its connectors itself, by the name given to `wrap()`. */
export function connectorNamed(name: string): Connector {
  return defaultConnectors.named(name);
}
