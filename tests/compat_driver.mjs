// Drives the published AgentRein npm SDK (agentrein 1.0.43, pinned in contract/compat/package.json) wrapping
// Octokit, as an agent would: the tests run it as `node --input-type=module -e <this file>` in contract/compat,
// so that its packages are found there; it plays one scenario and prints what the agent saw as one JSON line.
// Every connection to an address other than loopback is refused before anything is sent.
import net from 'node:net';
import { createRequire } from 'node:module';

const connect = net.Socket.prototype.connect;
net.Socket.prototype.connect = function guarded(...args) {
  const options = typeof args[0] === 'object' && args[0] !== null ? args[0] : { host: args[1] };
  const host = options.host ?? 'localhost';
  if (!['127.0.0.1', 'localhost', '::1'].includes(host) && !host.startsWith('127.')) {
    throw new Error(`the published SDK tried to reach ${host}: only loopback is allowed`);
  }
  return connect.apply(this, args);
};

const require = createRequire(`${process.cwd()}/`);
const { AgentRein } = require('agentrein'); // its ESM entry does not load on Node 20
const { Octokit } = await import('@octokit/rest');

const args = JSON.parse(process.env.COMPAT_SCENARIO);
const ar = new AgentRein({ apiKey: args.apiKey, serverUrl: args.serverUrl, failureMode: args.failureMode ?? 'closed' });
const held = args.requiresApproval ? { requiresApproval: args.requiresApproval, timeoutMs: args.timeoutMs, pollIntervalMs: 1000 } : {};
const seen = {};
try {
  const session = await ar.newSession({ agentId: 'triage-agent', intent: 'file an issue' });
  seen.session = { id: session.id, status: session.status, recordedWith: session.recordedWith };
  const github = ar.wrap(new Octokit({ auth: 'ghp_test', baseUrl: args.githubUrl }), session, { connector: 'github', ...held });
  const made = await github.rest.issues.create({ owner: 'acme', repo: 'shop', title: 'Checkout is slow' });
  seen.issue = made.data.number;
  if (args.branchFrom) {
    const comment = { owner: 'acme', repo: 'shop', issue_number: seen.issue, body: 'Looking into it' };
    seen.comment = (await github.rest.issues.createComment(comment)).data.id;
    await github.rest.git.createRef({ owner: 'acme', repo: 'shop', ref: 'refs/heads/fix-checkout', sha: args.branchFrom });
  }
  if (args.thenFail) {
    await github.rest.issues.update({ owner: 'acme', repo: 'shop', issue_number: 999999, title: 'Nobody' });
  }
  if (args.complete) {
    await ar.completeSession(session);
  }
} catch (error) {
  seen.raised = { name: error.name, status: error.status ?? null, reason: error.reason ?? null };
}
// Their logs of calls that succeeded are not awaited: give them a moment to land before the process ends.
await new Promise((resolve) => setTimeout(resolve, args.settleMs ?? 0));
console.log(JSON.stringify(seen));
