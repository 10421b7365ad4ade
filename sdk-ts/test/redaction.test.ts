/** The TypeScript redactor against the Python one (`agentrein_core.redaction`), on the same texts and
 *  payloads: what the two SDKs send and journal is redacted alike. */

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { resolve } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

import { Redactor } from '../src/index.js';

const ROOT = resolve(fileURLToPath(import.meta.url), '../../../..');
const PEM =
  '-----BEGIN RSA PRIVATE KEY-----\nMIIBOgIBAAJBAKj34GkxFhD90vcNLYLInFEX6Ppy1tPf9Cnzj4p4WGeKLs1Pt8Qu\n' +
  'KUpRKfFLfRYC9AIKjbJTWit+CqvjWYzvQwECAwEAAQ==\n-----END RSA PRIVATE KEY-----';

/** Kept whole: a git SHA-1 either case, a Stripe id, 40 characters of a path, a certificate (last line 40). */
const KEPT = [
  'revert da39a3ee5e6b4b0d3255bfef95601890afd80709 DA39A3EE5E6B4B0D3255BFEF95601890AFD80709 cus_NffrFeUfNV2Hib',
  'see repos/Acme/Web2/issues/12/comments/Abc1x',
  '-----BEGIN CERTIFICATE-----\nMIIBOgIBAAJBAKj34GkxFhD90vcNLYLInFEX6Ppy1tPf9Cnzj4p4WGeKLs1Pt8Qu\nKUpRKfFLfRYC9AIKjbJTWit+CqvjWYzvQwECAwEA\n-----END CERTIFICATE-----',
];
const TEXTS = [
  'https://hooks.slack.com/services/T0123ABC/B0456DEF/abcdefghijklmnopqrstuvwx',
  '/api/token/abc123def',
  '/v1/customers/cus_123/sources',
  '/reset/550e8400-e29b-41d4-a716-446655440000',
  '/api_keys/550e8400-e29b-41d4-a716-446655440000',
  'https://api.telegram.org/bot123456:ABCdefGHIjklMNOpqrSTUvwxYZ012345/sendMessage',
  '/discord/api/webhooks/1234/aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789',
  '/files/ProductionCluster2024EuWest',
  '/repos/ada-lovelace/Very-Long-Resource-Name2024',
  '/x/9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08',
  '/git/commits/9f86d081884c7d659a2feaa0c55ad015a3bf4f1b',
  'password=hunter2 and /v1/q8Zt4kLw9XmP2vRn7YbQ3sJd',
  'GET https://x.example/a?access_token=abc&page=2',
  '{"api_key": "k-123", "name": "ada"}',
  'Bearer abcdefghijkl12345 ok',
  `leaked sk_live_${'a'.repeat(24)} and ghp_${'b'.repeat(36)}`,
  'card 4242 4242 4242 4242 here, not 4242 4242 4242 4241',
  'POST /v1/orders',
  '/invite/abc',
  '/keys/refresh',
  '/verify/Qw3rTy8uIoP1aSdFgHjKlZxC',
  'mail 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 now',
  `key:\n${PEM}\nend`,
  `cut short: ${PEM.slice(0, 80)}`,
  'see https://bob:hunter2@api.test/v1/x and postgresql://app:p@ss/w0rd@db.internal:5432/app, redis://:s3@cache/0',
  'db_pw: letmein, DB_PW=abc, dbPw=xyz, creds: c1, credential=c2',
  'aws wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY done, https://x.test/?memo=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY',
  ...KEPT,
];
const PAYLOAD = {
  'X-Api-Key': 'a',
  client_secret: 'b',
  'X-Auth-Key': 'c',
  spinner: 'd',
  idempotencyKey: 'e',
  card: { number: '4242424242424242', pin: '1234', cvc: '123' },
  items: [{ webhookSignature: 'f', note: 'see /token/xyz' }],
  amount: 4242424242424242,
  dsn: 'postgresql://app:s3cr3t@db/app',
  db_pw: 'letmein',
};
const PYTHON = `
import json, sys
from agentrein_core.redaction import Redactor
asked = json.load(sys.stdin)
redactor = Redactor(["signature"])
print(json.dumps({"texts": [redactor.redact_text(t) for t in asked["texts"]], "payload": redactor.redact(asked["payload"])}))
`;

describe('redaction, against the Python redactor', () => {
  it('redacts the same texts and payloads the same way', async () => {
    const child = promisify(execFile)('uv', ['run', '--quiet', 'python', '-c', PYTHON], { cwd: ROOT });
    child.child.stdin!.end(JSON.stringify({ texts: TEXTS, payload: PAYLOAD }));
    const python = JSON.parse((await child).stdout) as { texts: string[]; payload: unknown };
    const redactor = new Redactor(['signature']);
    assert.deepEqual(TEXTS.map((t) => redactor.redactText(t)), python.texts);
    assert.deepEqual(redactor.redact(PAYLOAD), python.payload);
  });

  it('redacts the shapes issue 23 found missed, and keeps SHAs, ids and certificates', () => {
    const redactor = new Redactor();
    const shown = TEXTS.map((t) => redactor.redactText(t)).join('\n');
    const secrets = ['pQ8rS9tU0vW1xY2zA3bC4d', 'CAwEAAQ==', 'hunter2', 'p@ss', 's3@', 'letmein', 'xyz', 'c2', 'wJalrXUtnFEMI'];
    assert.deepEqual(secrets.filter((secret) => shown.includes(secret)), []);
    assert.deepEqual(KEPT.map((t) => redactor.redactText(t)), KEPT);
    const undo = redactor.redactUndo({ type: 'http-request', params: { url: 'https://a:pw@x.test/', json: { n: 'db_pw: x' } } });
    assert.deepEqual(undo.params, { url: 'https://a:[REDACTED]@x.test/', json: { n: 'db_pw: [REDACTED]' } });
  });
});
