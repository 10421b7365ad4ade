/** The connectors `wrap()` finds by name (the Python client's `Connectors`): each `AgentRein` holds one of
 *  its own, so two clients in one process never see each other's registrations. */

import type { Connector } from './connector.js';
import { ValidationError } from './errors.js';

export class ConnectorRegistry {
  readonly #connectors = new Map<string, Connector>();

  /** `defaults`: where a name this registry does not hold is looked up next. */
  constructor(private readonly defaults?: ConnectorRegistry) {}

  /** Make `connector` available by its name (a second connector of the same name replaces the first). */
  register(connector: Connector): void {
    if (typeof connector?.name !== 'string' || !connector.name) {
      throw new ValidationError('connector', 'a connector needs a name');
    }
    this.#connectors.set(connector.name, connector);
  }

  /** The connector registered as `name`; `ValidationError` naming the registered ones otherwise. */
  named(name: string): Connector {
    const found = this.find(name);
    if (found === undefined) {
      const known = this.names().join(', ') || 'none';
      throw new ValidationError('connector', `no connector named '${name}' is registered (registered: ${known})`);
    }
    return found;
  }

  private find(name: string): Connector | undefined {
    return this.#connectors.get(name) ?? this.defaults?.find(name);
  }

  private names(): string[] {
    return [...new Set([...this.#connectors.keys(), ...(this.defaults?.names() ?? [])])].sort();
  }
}
