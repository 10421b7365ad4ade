// The added latency of one wrapped call: the p50 of a fetch POST to FakeService through AgentRein (a real
// `agentrein serve` on SQLite, started by the test harness) minus the p50 of the same POST made raw.
// A figure, not a test: `npm run bench` (ROUNDS=500 npm run bench for more samples).

import { Harness } from '../dist-test/test/harness.js';

const ROUNDS = Number(process.env.ROUNDS ?? 300);
const WARM_UP = 30;

async function timed(call) {
  const samples = [];
  for (let i = 0; i < WARM_UP + ROUNDS; i++) {
    const started = process.hrtime.bigint();
    const answer = await call(i);
    await answer.arrayBuffer();
    if (i >= WARM_UP) samples.push(Number(process.hrtime.bigint() - started) / 1e6);
  }
  return samples.sort((a, b) => a - b);
}

const percentile = (sorted, p) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];

const harness = await Harness.start();
try {
  const agentrein = harness.client();
  const session = await agentrein.newSession({ agentId: 'bench', intent: 'wrapped-call latency' });
  const api = agentrein.wrap(fetch, session, { connector: 'http' });
  const url = `${harness.peers.serviceUrl}/v1/benches`;
  const post = (client) => (i) =>
    client(url, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ i }) });
  const raw = await timed(post(fetch));
  const wrapped = await timed(post(api));
  await agentrein.close();
  const [rawP50, wrappedP50] = [percentile(raw, 50), percentile(wrapped, 50)];
  console.log(`rounds: ${ROUNDS} (after ${WARM_UP} to warm up), fetch POST to FakeService, server on SQLite`);
  console.log(`raw fetch      p50 ${rawP50.toFixed(2)} ms  p95 ${percentile(raw, 95).toFixed(2)} ms`);
  console.log(`wrapped fetch  p50 ${wrappedP50.toFixed(2)} ms  p95 ${percentile(wrapped, 95).toFixed(2)} ms`);
  console.log(`added p50 ${(wrappedP50 - rawP50).toFixed(2)} ms (${(wrappedP50 / rawP50).toFixed(2)}x the raw call)`);
} finally {
  await harness.stop();
}
