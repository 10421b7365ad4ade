/** The SDK's HTTP to an AgentRein server, against a loopback server that misbehaves as a restarting one does. */

import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, it } from 'node:test';

import { AgentReinUnavailableError } from '../src/index.js';
import { Connection } from '../src/transport.js';

describe('a server that goes away while it answers', () => {
  it('is an outage (AgentReinUnavailableError), as one that cannot be reached is', async () => {
    const server = createServer((_request, response) => {
      response.writeHead(200, { 'Content-Type': 'application/json', 'Content-Length': '1000' });
      response.write('{"approvalId": "apr_1", "sta', () => response.socket?.destroy()); // cut mid-answer
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    try {
      const connection = new Connection(`http://127.0.0.1:${port}`, 'ar_test');
      await assert.rejects(connection.call('GET', '/approvals/apr_1'), (error: unknown) => {
        assert.ok(error instanceof AgentReinUnavailableError, String(error));
        assert.match(error.message, /went away while answering/);
        return true;
      });
    } finally {
      server.close();
    }
  });
});
