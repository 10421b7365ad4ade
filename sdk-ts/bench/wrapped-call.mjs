// Figures, not tests (`npm run bench`; ROUNDS=20 npm run bench for more samples), against FakeService and a
// real `agentrein serve` on SQLite, both started by the test harness:
// - the added latency of one wrapped call: a fetch POST made raw and through AgentRein, in interleaved blocks
//   of BLOCK calls each (after a warm-up); p50 and p95 of each side, and the added p50;
// - the approval wake-up: a wrapped POST held for approval (pollIntervalMs 2000: long-polls of 2 s); the
//   reviewer approves at t0, at a moment spread over the 2 s period; t1 is when the request reaches fetch.

import { Harness } from '../dist-test/test/harness.js';

const ROUNDS = Number(process.env.ROUNDS ?? 10);
const BLOCK = 30;
const WAKE_UPS = Number(process.env.WAKE_UPS ?? 8);

const percentile = (values, p) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
};
const ms = (value) => `${value.toFixed(2)} ms`;
const now = () => Number(process.hrtime.bigint()) / 1e6;
const sleep = (delay) => new Promise((resolve) => setTimeout(resolve, delay));

async function block(call, samples) {
  for (let i = 0; i < BLOCK; i++) {
    const started = now();
    await (await call()).arrayBuffer();
    samples?.push(now() - started);
  }
}

const harness = await Harness.start();
try {
  const agentrein = harness.client();
  const session = await agentrein.newSession({ agentId: 'bench', intent: 'wrapped-call latency' });
  const api = agentrein.wrap(fetch, session, { connector: 'http' });
  const url = `${harness.peers.serviceUrl}/v1/benches`;
  const init = { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: '{"bench":true}' };
  const raw = [];
  const wrapped = [];
  await block(() => fetch(url, init));
  await block(() => api(url, init));
  for (let round = 0; round < ROUNDS; round++) {
    await block(() => fetch(url, init), raw);
    await block(() => api(url, init), wrapped);
  }

  const wakeUps = [];
  for (let round = 0; round < WAKE_UPS; round++) {
    const held = await agentrein.newSession({ agentId: 'bench-approvals', intent: 'approval wake-up' });
    let reached = 0;
    const watched = (input, options) => {
      reached = now();
      return fetch(input, options);
    };
    const gated = agentrein.wrap(watched, held, { connector: 'http', requiresApproval: ['POST *'], pollIntervalMs: 2000 });
    const call = gated(url, init);
    let pending;
    while (!(pending = (await agentrein.getSession(held)).approvals.find((a) => a.status === 'PENDING'))) await sleep(5);
    await sleep(((round + 0.5) / WAKE_UPS) * 2000); // the decision falls at every phase of a long-poll
    const decided = now();
    await agentrein.approve(pending.approvalId, { reviewer: 'bench' });
    await (await call).arrayBuffer();
    wakeUps.push(reached - decided);
  }
  await agentrein.close();

  const added = percentile(wrapped, 50) - percentile(raw, 50);
  console.log(`wrapped call: ${ROUNDS} interleaved blocks of ${BLOCK} fetch POSTs a side to FakeService, server on SQLite`);
  console.log(`  raw fetch      p50 ${ms(percentile(raw, 50))}  p95 ${ms(percentile(raw, 95))}`);
  console.log(`  wrapped fetch  p50 ${ms(percentile(wrapped, 50))}  p95 ${ms(percentile(wrapped, 95))}`);
  console.log(`  added p50 ${ms(added)} (the wrapped call's p50 is ${(percentile(wrapped, 50) / percentile(raw, 50)).toFixed(2)}x the raw call's)`);
  console.log(`approval wake-up (${WAKE_UPS} decisions over the 2 s long-poll): decision to the call's request`);
  console.log(`  p50 ${ms(percentile(wakeUps, 50))}  max ${ms(Math.max(...wakeUps))} (approve() returns after the decision is stored)`);
} finally {
  await harness.stop();
}
