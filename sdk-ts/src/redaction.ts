/**
 * Redaction before anything leaves the agent (`agentrein_core.redaction`, whose rules the server applies
 * again to everything it stores). By key: a value is replaced by `[REDACTED]` when its key names a secret
 * (compared without case, `-` or `_`, as a substring: `X-Api-Key`, `client_secret`; the short words of
 * `SENSITIVE_WORDS` only as a whole word of the key: `X-Auth-Key` but not `spinner`), or when it is a
 * payment card number (13-19 digits passing the Luhn check), wherever it stands. In free text (an error
 * message, an api name, a body that is not JSON): the value of a secret `key=value` / `key: value`, known
 * token shapes, credentials in URL paths (`/token/<x>`, `/hooks/…/<x>`, a random-looking stretch), and
 * card numbers.
 */

import type { Json, UndoConfig } from './connector.js';

export const REDACTED = '[REDACTED]';

/** Key fragments that always mark a secret; a connector adds its own (`Connector.sensitiveFields`). */
export const DEFAULT_SENSITIVE_FIELDS: readonly string[] = [
  'password',
  'passwd',
  'pwd',
  'token',
  'secret',
  'apikey',
  'accesskey',
  'authorization',
  'cookie',
  'cardnumber',
  'cvc',
  'cvv',
  'privatekey',
  'passphrase',
];
/** Words too short to match inside other words: a secret only as a whole word of a key. */
export const SENSITIVE_WORDS: ReadonlySet<string> = new Set([
  'key',
  'pass',
  'pw',
  'pin',
  'sig',
  'auth',
  'creds',
  'credential',
  'credentials',
]);
/** Keys ending in a sensitive word that name no secret. */
export const NOT_SECRET_KEYS: ReadonlySet<string> = new Set(['idempotencykey']);

const WORD = /[A-Z]?[a-z]+|[A-Z]+(?![a-z])|[0-9]+/g;
const KEY_SEARCH = /(?<![A-Za-z])(?<key>[A-Za-z][\w.[\]-]*)["']?\s*[:=]\s*(?<quote>["']?)/g;
const VALUE = /(?:(?:Bearer|Basic|Token|Digest)\s+)?[^\s&,;"'<>(){}#]+/iy;
const QUOTED: Record<string, RegExp> = { "'": /[^']*/y, '"': /[^"]*/y };
const DIGIT_RUN = /(?<![\w-])[0-9](?:[ -]?[0-9]){12,18}(?![\w-])/g;
const CARD_LIKE = /^[0-9][0-9 -]{11,22}[0-9]$/;
const KNOWN_TOKEN = new RegExp(
  '(?<![A-Za-z0-9])(?:' +
    [
      'gh[pousr]_[A-Za-z0-9]{36,}',
      'github_pat_[A-Za-z0-9_]{22,}',
      '[sr]k_(?:live|test)_[A-Za-z0-9]{10,}',
      'whsec_[A-Za-z0-9+/=]{20,}',
      '[a-z]{2,5}_[A-Za-z0-9]+_secret_[A-Za-z0-9]+',
      '(?:xox[abposer]|xapp)-[A-Za-z0-9-]{10,}',
      '(?:AKIA|ASIA)[A-Z0-9]{16}',
      'AIza[A-Za-z0-9_-]{35}',
      'glpat-[A-Za-z0-9_-]{20,}',
      'SG\\.[\\w-]{16,}\\.[\\w-]{16,}',
      'sk-(?=[\\w-]*[0-9])(?=[\\w-]*[A-Z])[\\w-]{32,}',
      'npm_[A-Za-z0-9]{36}',
      'pypi-[A-Za-z0-9_-]{50,}',
      'eyJ[\\w-]+\\.eyJ[\\w-]+\\.[\\w-]*',
      '(?<=[Bb]earer )(?![A-Z]?[a-z]+\\b)[A-Za-z0-9._~+/-]{8,}=*',
    ].join('|') +
    ')',
  'g',
);

/** A private key's PEM block, to its END line or the end of its base64 when cut short (certificates kept). */
const PEM = /-----BEGIN [A-Z0-9 ]*PRIVATE KEY[A-Z ]*-----(?:[A-Za-z0-9+/=\s\\:,.]|-(?!----))*(?:-----END [A-Z0-9 ]*-----)?/g;
/** The password of a URL's or DSN's `user:password@`, up to the last `@` before a space. */
const USERINFO = /(?<=:\/\/)([^\s:/?#@'"<>]*):[^\s'"<>]+@/g;
/** A bare run of exactly 40 base64 characters (an AWS secret access key's shape), not a line of a longer
 *  base64 text or of a PEM block. */
const BASE64_40 = /(?<![\w/+-])(?<![A-Za-z0-9/+=]\n)(?<![A-Za-z0-9/+=]\r\n)(?<!-----\n)[A-Za-z0-9/+]{40}(?![\w/+=-])/g;

/** Collections whose members are secrets: the segment after one is a secret unless ordinary (a UUID there
 *  is a member's id, `/api_keys/<uuid>`)... */
const SECRET_COLLECTIONS = new Set(['tokens', 'secrets', 'keys', 'apikeys', 'passwords', 'invites', 'invitations']);
/** ...and every last word of a path segment after which the next one is a secret unless ordinary. */
const SECRET_SEGMENTS = new Set([
  ...SECRET_COLLECTIONS,
  ...['token', 'secret', 'key', 'apikey', 'password', 'passwd', 'reset', 'invite', 'invitation', 'verify', 'confirm', 'activate'],
]);
/** Segments after which every segment that is not ordinary is a secret (webhook URLs carry their token). */
const HOOK_SEGMENTS = new Set(['hook', 'hooks', 'webhook', 'webhooks']);
const NAMING_SUFFIXES = [...SECRET_SEGMENTS, ...HOOK_SEGMENTS];
const PATH = /(?:\/[^/?#\s'"<>(){},;|\\^`]*)+/g;
const SLACK_IDS = /^T[A-Z0-9]+\/B[A-Z0-9]+$/;
const TELEGRAM = /^bot[0-9]+:[\w-]{20,}$/;
const ORDINARY = /^(?:[0-9]+|v[0-9]+|[A-Za-z]+[0-9]*(?:[-_][A-Za-z]+[0-9]*)*|[a-z]{1,12}_[A-Za-z0-9]+)$/;
const STRETCH = /[A-Za-z0-9_-]{20,}/g;
const PREFIXED_ID = /^[a-z]{1,12}_/;
const UUID = /^[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}$/;
const HEX = /^[A-Za-z]{0,4}?([0-9a-fA-F]+)$/;
const WORD_PART = /^(?:[A-Z]?[a-z]*[0-9]*|[A-Z]+[0-9]*|[0-9]+(?:[a-z]{1,2}|x[0-9]+)?)$/;
/** How evenly a stretch's characters must be spread, as a share of the most its length allows. */
const RANDOM_ENTROPY = 0.8;

/** A URL path with every segment that is a credential replaced (the rules of `redaction.py`'s docstring). */
function redactPath(path: string): string {
  const segments = path.split('/');
  let named: string | null = null; // the last word of the previous segment, when it names a secret
  let hooked = false; // a hooks segment came before
  segments.forEach((segment, i) => {
    if (segment && segment !== REDACTED) {
      if ((named !== null || hooked) && !ordinary(segment, named !== null && SECRET_COLLECTIONS.has(named))) {
        segments[i] = REDACTED;
      } else if (i >= 3 && segments[i - 3] === 'services' && SLACK_IDS.test(segments.slice(i - 2, i).join('/'))) {
        segments[i] = REDACTED; // a Slack webhook's /services/T…/B…/<token>
      } else if (segment.length >= 20 && (TELEGRAM.test(segment) || (segment.match(STRETCH) ?? []).some(looksRandom))) {
        segments[i] = REDACTED;
      }
    }
    const lower = segment.toLowerCase();
    const last = NAMING_SUFFIXES.some((suffix) => lower.endsWith(suffix)) ? lastWord(segment) : null;
    named = last !== null && SECRET_SEGMENTS.has(last) ? last : null;
    hooked = hooked || (last !== null && HOOK_SEGMENTS.has(last));
  });
  return segments.join('/');
}

function lastWord(segment: string): string | null {
  const words = segment.match(WORD);
  return words ? words[words.length - 1]!.toLowerCase() : null;
}

function ordinary(segment: string, inCollection: boolean): boolean {
  return ORDINARY.test(segment) || (inCollection && UUID.test(segment));
}

/** A stretch of 20+ letters, digits, `-` and `_` that is a token rather than an id or a name. */
function looksRandom(stretch: string): boolean {
  if (PREFIXED_ID.test(stretch) || UUID.test(stretch)) return false;
  const hasDigit = /[0-9]/.test(stretch);
  const hex = HEX.exec(stretch);
  if (hex !== null && hasDigit) return hex[1]!.length > 40; // ids up to SHA-1's 40 digits
  if (!hasDigit || !/[A-Za-z]/.test(stretch)) return false;
  if (stretch.split(/[-_]/).every((part) => WORD_PART.test(part))) return false;
  return entropy(stretch) >= RANDOM_ENTROPY * Math.log2(Math.min(stretch.length, 64));
}

/** Whether a 40-character base64 run is an AWS secret access key: both cases and digits, random-looking,
 *  not words and numbers between `/` (a path); a git SHA-1 (hex, one case) is kept. */
function awsSecret(run: string): boolean {
  return (
    /[A-Z]/.test(run) &&
    /[a-z]/.test(run) &&
    /[0-9]/.test(run) &&
    !run.split(/[/+]/).every((part) => WORD_PART.test(part)) &&
    entropy(run) >= RANDOM_ENTROPY * Math.log2(run.length)
  );
}

/** Shannon entropy in bits a character. */
function entropy(text: string): number {
  const counts = new Map<string, number>();
  for (const c of text) counts.set(c, (counts.get(c) ?? 0) + 1);
  let bits = 0;
  for (const k of counts.values()) bits -= (k / text.length) * Math.log2(k / text.length);
  return bits;
}

export function normaliseKey(key: string): string {
  return key.toLowerCase().replaceAll('_', '').replaceAll('-', '');
}

export function looksLikeCardNumber(value: string): boolean {
  if (!CARD_LIKE.test(value)) return false;
  const digits = value.replace(/[ -]/g, '');
  if (digits.length < 13 || digits.length > 19) return false;
  let total = 0;
  [...digits].reverse().forEach((ch, i) => {
    let d = Number(ch);
    if (i % 2 === 1) d = d > 4 ? d * 2 - 9 : d * 2;
    total += d;
  });
  return total % 10 === 0;
}

/** Redacts one connector's payloads: the default fragments plus the connector's own. */
export class Redactor {
  readonly fragments: readonly string[];
  private readonly verdicts = new Map<string, boolean>();

  constructor(extraFields: readonly string[] = []) {
    this.fragments = [...new Set([...DEFAULT_SENSITIVE_FIELDS, ...extraFields.map(normaliseKey)])].sort();
  }

  isSensitiveKey(key: string): boolean {
    let verdict = this.verdicts.get(key);
    if (verdict === undefined) {
      const normalised = normaliseKey(key);
      verdict =
        this.fragments.some((f) => normalised.includes(f)) ||
        (!NOT_SECRET_KEYS.has(normalised) && (key.match(WORD) ?? []).some((w) => SENSITIVE_WORDS.has(w.toLowerCase())));
      if (this.verdicts.size < 10_000) this.verdicts.set(key, verdict);
    }
    return verdict;
  }

  /** A copy of `value` (JSON-like) with every secret replaced, in free text too. */
  redact(value: unknown): Json {
    if (Array.isArray(value)) return value.map((v) => this.redact(v));
    if (typeof value === 'string') return looksLikeCardNumber(value) ? REDACTED : this.redactText(value);
    if (typeof value === 'number') return Number.isInteger(value) && looksLikeCardNumber(String(value)) ? REDACTED : value;
    if (typeof value === 'boolean' || value === null || value === undefined) return value ?? null;
    if (typeof value === 'object') {
      const out: { [key: string]: Json } = {};
      for (const [k, v] of Object.entries(value)) out[k] = this.isSensitiveKey(k) ? REDACTED : this.redact(v);
      return out;
    }
    return String(value);
  }

  /** An undo config redacted as a payload is, its text too: one that lost a secret is refused at rollback. */
  redactUndo(undo: UndoConfig): UndoConfig {
    return { ...undo, params: this.redact(undo.params) as { readonly [key: string]: Json } };
  }

  /** `text` with secret `key=value` values, known tokens, private keys, URL passwords and card numbers replaced. */
  redactText(text: string): string {
    if (looksLikeCardNumber(text)) return REDACTED;
    if (text.includes('-----BEGIN ')) text = text.replace(PEM, REDACTED);
    if (text.includes('=') || text.includes(':')) {
      text = this.redactPairs(text);
      if (text.includes('://') && text.includes('@')) text = text.replace(USERINFO, `$1:${REDACTED}@`);
    }
    text = text.replace(KNOWN_TOKEN, REDACTED);
    if (text.includes('/')) text = text.replace(PATH, redactPath);
    if (text.length >= 40) text = text.replace(BASE64_40, (run) => (awsSecret(run) ? REDACTED : run));
    return text.replace(DIGIT_RUN, (run) => (looksLikeCardNumber(run) ? REDACTED : run));
  }

  private redactPairs(text: string): string {
    // A key that names no secret is stepped over, not its value: `https:` must not hide `?access_token=`.
    const kept: string[] = [];
    let pos = 0;
    for (;;) {
      KEY_SEARCH.lastIndex = pos;
      const found = KEY_SEARCH.exec(text);
      if (found === null) break;
      const end = found.index + found[0].length;
      const quote = found.groups?.['quote'] ?? '';
      const valuePattern = quote ? QUOTED[quote]! : VALUE;
      valuePattern.lastIndex = end;
      const value = valuePattern.exec(text);
      if (value === null || !value[0] || !this.isSensitiveKey(found.groups?.['key'] ?? '')) {
        kept.push(text.slice(pos, end));
        pos = end;
        continue;
      }
      kept.push(text.slice(pos, end) + REDACTED);
      pos = end + value[0].length;
    }
    kept.push(text.slice(pos));
    return kept.join('');
  }
}

