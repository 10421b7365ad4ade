"""Redaction of secrets from what AgentRein stores and logs.

By key. A value is replaced by ``REDACTED`` when its key names a secret (compared without case, ``-`` or
``_``, and as a substring, so ``X-Api-Key`` and ``client_secret`` are caught; short words such as ``pin`` or
``key`` only as a whole word of the key, so ``X-Auth-Key`` is caught and ``spinner`` is not), or when it is a
string that looks like a payment card number (13-19 digits passing the Luhn check), wherever it stands.

In free text (an error message, a plain-text body, an api name, a URL, an undo's parameters, a session's
agent id and intent, a policy's name and globs, a reviewer's reason, a log line, an event or a verifier's
question on its way out) these are replaced:

- a private key's PEM block (``-----BEGIN … PRIVATE KEY-----``), whole;
- the value of every ``key=value`` or ``key: value`` whose key names a secret;
- the password of a URL's or DSN's ``user:password@``;
- every card number;
- every known token shape (:data:`KNOWN_TOKENS`: GitHub ``ghp_…``/``github_pat_…``, Stripe ``sk_live_…``,
  ``rk_…``, ``whsec_…`` and client secrets, Slack ``xoxb-…``, AWS ``AKIA…``, Google ``AIza…``, GitLab
  ``glpat-…``, SendGrid ``SG.….…``, OpenAI-style ``sk-…``, npm, PyPI, and JWTs ``eyJ….eyJ….…``), and the
  token after ``Bearer``;
- a bare run of exactly 40 base64 characters with both cases and digits that looks random (an AWS secret
  access key; a git SHA-1, hex of one case, is kept);
- in a URL path, a segment that is a credential. A segment is one when
  1. it follows a segment whose last word names a secret (:data:`SECRET_SEGMENTS`: ``/token/``, ``/keys/``,
     ``/secrets/``, ``/password/``, ``/reset/``, ``/invite/``…), or it comes anywhere after a ``/hooks/`` or
     ``/webhooks/`` segment (Discord's ``/webhooks/<id>/<token>``), unless it is ordinary: a number, a word
     (letters, then perhaps digits, joined by ``-`` or ``_``: ``refresh``, ``public-key``, ``DB_PASSWORD2``),
     a version (``v2``), a prefixed id (``key_123``), or a UUID after a collection (``/api_keys/<uuid>``; after
     ``/reset/`` or ``/invite/`` a UUID is taken for the secret it often is); or it is the third segment after
     ``/services/`` in a Slack webhook (``/services/T…/B…/<token>``);
  2. it is a Telegram ``bot<id>:<token>``;
  3. anywhere, it holds a stretch (of letters, digits, ``-`` and ``_``) of 20 or more characters that looks
     random: it has letters and digits, not all its parts (between ``-`` and ``_``) are words or numbers,
     and its Shannon entropy is at least 0.8 of the most its length allows (``log2(min(length, 64))`` bits
     a character) - random tokens score about 0.85 and above, slugs and names about 0.7 to 0.8 - or it is
     a run of more than 40 hex digits.
  Kept, however long: numbers, dates, UUIDs (outside rule 1), prefixed ids (``cus_123``, ``pi_3Mtw…``,
  AgentRein's ``act_…``), hex of up to 40 digits after at most four letters (MongoDB ObjectIds, UUIDs
  without dashes, git SHA-1s, Twilio SIDs), and slugs and names whose parts are words (``ada-lovelace``,
  ``Very-Long-Resource-Name2024``). Not caught, for no shape tells them from a name: a short token, or a
  token of letters only, where no word before it names a secret; a long CamelCase name with digits
  (``ProductionCluster2024EuWest``) is taken for a token.

An undo is redacted as a payload is, its text too; one whose stored parameters were redacted cannot be run
as it was described:
:func:`~agentrein_core.runner.run_inverse` refuses it rather than send it. :class:`RedactingFilter` redacts
log records with the same rules.
"""

from __future__ import annotations

import logging
import math
import re
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any, overload

from agentrein_core.model import UndoConfig

REDACTED = "[REDACTED]"

#: Key fragments that always mark a secret; a connector adds its own through ``Connector.sensitive_fields``.
DEFAULT_SENSITIVE_FIELDS = frozenset(
    {
        "password",
        "passwd",
        "pwd",
        "token",
        "secret",
        "apikey",
        "accesskey",
        "authorization",
        "cookie",
        "cardnumber",
        "cvc",
        "cvv",
        "privatekey",
        "passphrase",
    }
)
#: Words too short to match inside other words (``pass`` in ``compass``): a secret only as a whole word of a
#: key, e.g. ``X-Auth-Key``, ``Ocp-Apim-Subscription-Key``, ``card[pin]``, ``db_pw`` or a query's ``sig``.
SENSITIVE_WORDS = frozenset({"key", "pass", "pw", "pin", "sig", "auth", "creds", "credential", "credentials"})
#: Keys ending in a sensitive word that name no secret.
NOT_SECRET_KEYS = frozenset({"idempotencykey"})

_WORD = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|[0-9]+")
#: ``key=value``, ``key: value``, ``"key": "value"``: the key and what separates it from its value.
#: (Possessive, and never started within a word: a word followed by neither costs one look, not one a letter.)
_KEY = re.compile(r"""(?<![A-Za-z])(?P<key>[A-Za-z][\w.\[\]-]*+)["']?\s*[:=]\s*(?P<quote>["']?)""")
#: A value: with its auth scheme (``Bearer x``) if any, up to the next separator (or closing quote).
_VALUE = re.compile(r"(?:(?:Bearer|Basic|Token|Digest)\s+)?[^\s&,;\"'<>(){}#]+", re.IGNORECASE)
_QUOTED = {"'": re.compile(r"[^']*"), '"': re.compile(r'[^"]*')}
#: A PEM block of a private key (``-----BEGIN RSA PRIVATE KEY-----``, OpenSSH's, PGP's), with its headers, up
#: to its END line, or to the end of its base64 when it was cut short. Certificates and public keys are kept.
_PEM = re.compile(
    r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY[A-Z ]*-----(?:[A-Za-z0-9+/=\s\\:,.]|-(?!----))*(?:-----END [A-Z0-9 ]*-----)?"
)
#: The password of a URL's ``user:password@`` (a DSN's too: ``postgresql://app:pw@db/app``), up to the last
#: ``@`` before a space (a password may hold an unescaped ``@`` or ``/``: better hide a path's too).
_USERINFO = re.compile(r"(?<=://)(?P<user>[^\s:/?#@'\"<>]*):[^\s'\"<>]+@")
#: A bare run of exactly 40 base64 characters: an AWS secret access key's shape (judged by :func:`_aws_secret`),
#: unless it is a line of a longer base64 text (a certificate's last line) or of a PEM block.
_BASE64_40 = re.compile(
    r"(?<![\w/+-])(?<![A-Za-z0-9/+=]\n)(?<![A-Za-z0-9/+=]\r\n)(?<!-----\n)[A-Za-z0-9/+]{40}(?![\w/+=-])"
)
_BASE64_PARTS = re.compile(r"[/+]")
_DIGIT_RUN = re.compile(r"(?<![\w-])[0-9](?:[ -]?[0-9]){12,18}(?![\w-])")
_CARD_LIKE = re.compile(r"^[0-9][0-9 -]{11,22}[0-9]$")

#: Tokens whose shape alone gives them away, wherever they stand: each pattern, with the marks one of which
#: any text it matches holds (a text with none is not searched: most texts hold none).
KNOWN_TOKENS: tuple[tuple[tuple[str, ...], str], ...] = (
    (("ghp_", "gho_", "ghu_", "ghs_", "ghr_"), r"gh[pousr]_[A-Za-z0-9]{36,}"),  # GitHub
    (("github_pat_",), r"github_pat_[A-Za-z0-9_]{22,}"),
    (("k_live_", "k_test_"), r"[sr]k_(?:live|test)_[A-Za-z0-9]{10,}"),  # Stripe secret and restricted keys
    (("whsec_",), r"whsec_[A-Za-z0-9+/=]{20,}"),  # Stripe webhook signing secrets
    (("_secret_",), r"[a-z]{2,5}_[A-Za-z0-9]+_secret_[A-Za-z0-9]+"),  # Stripe client secrets (pi_…_secret_…)
    (("xox", "xapp-"), r"(?:xox[abposer]|xapp)-[A-Za-z0-9-]{10,}"),  # Slack
    (("AKIA", "ASIA"), r"(?:AKIA|ASIA)[A-Z0-9]{16}"),  # AWS access key ids
    (("AIza",), r"AIza[A-Za-z0-9_-]{35}"),  # Google API keys
    (("glpat-",), r"glpat-[A-Za-z0-9_-]{20,}"),  # GitLab
    (("SG.",), r"SG\.[\w-]{16,}\.[\w-]{16,}"),  # SendGrid
    (("sk-",), r"sk-(?=[\w-]*[0-9])(?=[\w-]*[A-Z])[\w-]{32,}"),  # OpenAI, Anthropic and the like
    (("npm_",), r"npm_[A-Za-z0-9]{36}"),
    (("pypi-",), r"pypi-[A-Za-z0-9_-]{50,}"),
    (("eyJ",), r"eyJ[\w-]+\.eyJ[\w-]+\.[\w-]*"),  # a JWT: base64url of '{"…' twice, then a signature
    (("earer ",), r"(?<=[Bb]earer )(?![A-Z]?[a-z]+\b)[A-Za-z0-9._~+/-]{8,}=*"),  # after Bearer (not a word)
)
_TOKEN_MARK = re.compile("|".join(re.escape(mark) for marks, _ in KNOWN_TOKENS for mark in marks))
_KNOWN_TOKEN = re.compile(r"(?<![A-Za-z0-9])(?:" + "|".join(pattern for _, pattern in KNOWN_TOKENS) + r")")

#: Collections whose members are secrets: the segment after one is a secret unless ordinary (a UUID there is
#: the id of a member, ``/api_keys/<uuid>``)...
SECRET_COLLECTIONS = frozenset({"tokens", "secrets", "keys", "apikeys", "passwords", "invites", "invitations"})
#: ...and every last word of a path segment after which the next one is a secret unless ordinary.
SECRET_SEGMENTS = SECRET_COLLECTIONS | {
    "token",
    "secret",
    "key",
    "apikey",
    "password",
    "passwd",
    "reset",
    "invite",
    "invitation",
    "verify",
    "confirm",
    "activate",
}
#: Segments after which every segment that is not ordinary is a secret (webhook URLs carry their token).
HOOK_SEGMENTS = frozenset({"hook", "hooks", "webhook", "webhooks"})
_NAMING_SUFFIXES = tuple(SECRET_SEGMENTS | HOOK_SEGMENTS)
#: A URL path: ``/``-separated segments, up to its query, fragment, whitespace or quotes.
_PATH = re.compile(r"(?:/[^/?#\s'\"<>(){},;|\\^`]*)+")
_SLACK_IDS = re.compile(r"T[A-Z0-9]+/B[A-Z0-9]+")
_TELEGRAM = re.compile(r"bot[0-9]+:[\w-]{20,}")
_ORDINARY = re.compile(r"[0-9]+|v[0-9]+|[A-Za-z]+[0-9]*(?:[-_][A-Za-z]+[0-9]*)*|[a-z]{1,12}_[A-Za-z0-9]+")
_STRETCH = re.compile(r"[A-Za-z0-9_-]{20,}")
_PREFIXED_ID = re.compile(r"[a-z]{1,12}_")
_UUID = re.compile(r"[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}")
_HEX = re.compile(r"[A-Za-z]{0,4}?([0-9a-fA-F]+)")
#: A part of a slug or name: a word (perhaps capitalised, perhaps followed by digits), an acronym, a number
#: (perhaps with a suffix: ``2nd``, ``4k``) or dimensions (``1024x768``).
_WORD_PART = re.compile(r"[A-Z]?[a-z]*[0-9]*|[A-Z]+[0-9]*|[0-9]+(?:[a-z]{1,2}|x[0-9]+)?")
_PARTS = re.compile(r"[-_]")
#: How evenly a stretch's characters must be spread, as a share of the most its length allows.
RANDOM_ENTROPY = 0.8


def normalise_key(key: str) -> str:
    return key.lower().replace("_", "").replace("-", "")


def _luhn_ok(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch)
        if i % 2 == 1:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def looks_like_card_number(value: str) -> bool:
    if not _CARD_LIKE.match(value):
        return False
    digits = re.sub(r"[ -]", "", value)
    return 13 <= len(digits) <= 19 and _luhn_ok(digits)


def _card_in_text(match: re.Match[str]) -> str:
    return REDACTED if looks_like_card_number(match.group(0)) else match.group(0)


def _last_word(segment: str) -> str | None:
    """The segment's last word, lowercase (``api_keys`` -> ``keys``; ``monkey`` -> ``monkey``)."""
    words = _WORD.findall(segment)
    return words[-1].lower() if words else None


def _redact_path(match: re.Match[str]) -> str:
    segments = match.group(0).split("/")
    named: str | None = None  # the last word of the previous segment, when it names a secret
    hooked = False  # a hooks segment came before
    for i, segment in enumerate(segments):
        if segment and segment != REDACTED:
            if (named or hooked) and not _ordinary(segment, named in SECRET_COLLECTIONS):
                segments[i] = REDACTED
            elif i >= 3 and segments[i - 3] == "services" and _SLACK_IDS.fullmatch("/".join(segments[i - 2 : i])):
                segments[i] = REDACTED  # a Slack webhook's /services/T…/B…/<token>
            elif len(segment) >= 20 and (_TELEGRAM.fullmatch(segment) or _holds_random_stretch(segment)):
                segments[i] = REDACTED
        last = _last_word(segment) if segment.lower().endswith(_NAMING_SUFFIXES) else None  # most name nothing
        named = last if last in SECRET_SEGMENTS else None
        hooked = hooked or last in HOOK_SEGMENTS
    return "/".join(segments)


def _ordinary(segment: str, in_collection: bool) -> bool:
    return _ORDINARY.fullmatch(segment) is not None or (in_collection and _UUID.fullmatch(segment) is not None)


def _holds_random_stretch(segment: str) -> bool:
    return any(_looks_random(stretch) for stretch in _STRETCH.findall(segment))


def _looks_random(stretch: str) -> bool:
    """A stretch of 20+ letters, digits, ``-`` and ``_`` that is a token rather than an id or a name."""
    if _PREFIXED_ID.match(stretch) or _UUID.fullmatch(stretch):
        return False
    hex_run = _HEX.fullmatch(stretch)
    if hex_run is not None and any(c.isdigit() for c in stretch):
        return len(hex_run.group(1)) > 40  # ids up to SHA-1's 40 digits; a longer run is a secret
    if not any(c.isdigit() for c in stretch) or not any(c.isalpha() for c in stretch):
        return False
    if all(_WORD_PART.fullmatch(part) for part in _PARTS.split(stretch)):
        return False
    return _entropy(stretch) >= RANDOM_ENTROPY * math.log2(min(len(stretch), 64))


def _aws_secret(match: re.Match[str]) -> str:
    """The run redacted if it looks like an AWS secret access key: upper and lower case letters and digits,
    spread as randomly as :func:`_looks_random` asks, and not words and numbers between ``/`` (a path). A git
    SHA-1 (40 hex digits, one case) is kept."""
    run = match.group(0)
    if (
        any(c.isupper() for c in run)
        and any(c.islower() for c in run)
        and any(c.isdigit() for c in run)
        and not all(_WORD_PART.fullmatch(part) for part in _BASE64_PARTS.split(run))
        and _entropy(run) >= RANDOM_ENTROPY * math.log2(len(run))
    ):
        return REDACTED
    return run


def _entropy(text: str) -> float:
    """Shannon entropy in bits a character."""
    n = len(text)
    return -sum(k / n * math.log2(k / n) for k in Counter(text).values())


#: A glob's wildcards: ``*``, ``?`` and ``[…]`` sets.
_GLOB_WILDCARD = re.compile(r"\*+|\?|\[!?\]?[^\]]*\]")
#: The marker as a glob matches it (``[`` alone opens a set).
_ESCAPED_MARKER = "[[]" + REDACTED[1:]


def _stand_in(i: int) -> str:
    """A word no rule redacts, unique for ``i``, that stands in for a glob's ``i``-th wildcard."""
    return "Zwildcard" + "".join(chr(ord("a") + int(d)) for d in str(i)) + "Z"


#: The longest text whose redaction is remembered (at most 10,000 texts are, a few MB).
_REMEMBERED_TEXT = 300


class Redactor:
    """Redacts one connector's payloads: the default fragments plus the connector's own."""

    def __init__(self, extra_fields: Iterable[str] = ()) -> None:
        self.fragments = frozenset(DEFAULT_SENSITIVE_FIELDS | {normalise_key(f) for f in extra_fields})
        self._pattern = re.compile("|".join(re.escape(f) for f in sorted(self.fragments)))
        self._verdicts: dict[str, bool] = {}  # keys repeat from call to call: decide each once
        self._texts: dict[str, str] = {}  # and so do short texts (methods, paths, URLs, statuses)

    def is_sensitive_key(self, key: str) -> bool:
        verdict = self._verdicts.get(key)
        if verdict is None:
            normalised = normalise_key(key)
            verdict = self._pattern.search(normalised) is not None or (
                normalised not in NOT_SECRET_KEYS and any(w.lower() in SENSITIVE_WORDS for w in _WORD.findall(key))
            )
            if len(self._verdicts) < 10_000:
                self._verdicts[key] = verdict
        return verdict

    def redact(self, value: Any) -> Any:
        """A copy of ``value`` (JSON-like: dicts, lists, scalars) with every secret replaced, free text too."""
        return self._redact(value, self.redact_text)

    @overload
    def redact_undo(self, undo: UndoConfig) -> UndoConfig: ...
    @overload
    def redact_undo(self, undo: None) -> None: ...
    def redact_undo(self, undo: UndoConfig | None) -> UndoConfig | None:
        """An undo config redacted as a payload is, its text too (a URL, a body, a file it restores): an undo
        that lost a secret this way is refused when it is due (:func:`~agentrein_core.runner.run_inverse`)
        rather than sent other than it was described."""
        if undo is None:
            return None
        return UndoConfig(undo.type, self.redact(undo.params), undo.require_approval)

    def redact_glob(self, glob: str | None) -> str | None:
        """A policy's match glob redacted as the text it is matched against (an api name, an agent id) is, so
        that it still matches that text: its wildcards are kept (put aside as words while its text is redacted,
        else ``/tokens/*`` would lose its ``*``), and each marker is escaped to match the marker itself."""
        if glob is None:
            return None
        wildcards = _GLOB_WILDCARD.findall(glob)
        stand_ins = iter(_stand_in(i) for i in range(len(wildcards)))
        redacted = self.redact_text(_GLOB_WILDCARD.sub(lambda _: next(stand_ins), glob))
        for i, wildcard in enumerate(wildcards):
            redacted = redacted.replace(_stand_in(i), wildcard, 1)
        return redacted.replace(REDACTED, _ESCAPED_MARKER)

    def redact_text(self, text: str) -> str:
        """``text`` with the value of every secret ``key=value`` (or ``key: value``), every known token, every
        credential in a URL path and every card number replaced (the rules of the module's docstring): error
        messages, plain-text bodies, api names, URLs, intents and reasons carry secrets in free text."""
        redacted = self._texts.get(text)
        if redacted is None:
            redacted = self._redact_text(text)
            if len(text) <= _REMEMBERED_TEXT and len(self._texts) < 10_000:
                self._texts[text] = redacted
        return redacted

    def _redact_text(self, text: str) -> str:
        if looks_like_card_number(text):
            return REDACTED
        if "-----BEGIN " in text:  # first, whole: its headers would be read as pairs
            text = _PEM.sub(REDACTED, text)
        if "=" in text or ":" in text:  # the common case, a short text of neither, costs no regex
            text = self._redact_pairs(text)
            if "://" in text and "@" in text:
                text = _USERINFO.sub(rf"\g<user>:{REDACTED}@", text)
        if _TOKEN_MARK.search(text):
            text = _KNOWN_TOKEN.sub(REDACTED, text)
        if "/" in text:
            text = _PATH.sub(_redact_path, text)
        if len(text) >= 40:
            text = _BASE64_40.sub(_aws_secret, text)
        return _DIGIT_RUN.sub(_card_in_text, text)

    def _redact_pairs(self, text: str) -> str:
        # A key that names no secret is stepped over, not its value: a URL's ``https:`` must not hide the
        # ``?access_token=`` that follows it.
        kept: list[str] = []
        pos = 0
        while (found := _KEY.search(text, pos)) is not None:
            value = (_QUOTED[found["quote"]] if found["quote"] else _VALUE).match(text, found.end())
            if value is None or not value.group(0) or not self.is_sensitive_key(found["key"]):
                kept.append(text[pos : found.end()])
                pos = found.end()
                continue
            kept.append(text[pos : found.end()] + REDACTED)
            pos = value.end()
        kept.append(text[pos:])
        return "".join(kept)

    def _redact(self, value: Any, text: Callable[[str], str]) -> Any:
        if isinstance(value, dict):
            return {k: REDACTED if self.is_sensitive_key(str(k)) else self._redact(v, text) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self._redact(v, text) for v in value]
        if isinstance(value, str):
            return REDACTED if looks_like_card_number(value) else text(value)
        if isinstance(value, int) and not isinstance(value, bool) and looks_like_card_number(str(value)):
            return REDACTED
        return value


class Redactors:
    """One :class:`Redactor` per connector, built once: the default fields plus those ``fields_of`` the
    connector (its ``sensitive_fields``; none for a connector that is not installed); and :attr:`common`, for
    text of no one connector (a session's intent, a reviewer's reason, a rollback's trigger, a log line),
    with every installed connector's fields (``every_field``)."""

    def __init__(self, fields_of: Callable[[str], Iterable[str]], every_field: Iterable[str] = ()) -> None:
        self._fields_of = fields_of
        self._by_connector: dict[str, Redactor] = {}
        self.common = Redactor(every_field)

    def of(self, connector: str) -> Redactor:
        redactor = self._by_connector.get(connector)
        if redactor is None:  # a race builds the same redactor twice, harmlessly
            redactor = self._by_connector[connector] = Redactor(self._fields_of(connector))
        return redactor


#: The loggers AgentRein's own lines are written to (a filter on a logger sees only the records made on it,
#: not those its children pass up).
AGENTREIN_LOGGERS = ("agentrein", "agentrein.server", "agentrein.verification")
#: ...and httpx's too, which logs at INFO the URL of every request it sends (inverses, webhook deliveries,
#: verifier calls), tokens and all: redacted in a process that sends them with an organisation's credentials.
REQUEST_LOGGERS = ("httpx", *AGENTREIN_LOGGERS)


class RedactingFilter(logging.Filter):
    """Redacts each record's message, and the traceback it carries, with ``redactor``'s free-text rules:
    a log line may hold a URL with its token (httpx logs every request's URL at INFO), an api name or an
    error that echoes a card."""

    def __init__(self, redactor: Redactor) -> None:
        super().__init__()
        self.redactor = redactor

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a record whose arguments do not fit its format fails in the handler, as without us
            return True
        redacted = self.redactor.redact_text(message)
        if redacted != message:
            record.msg, record.args = redacted, None
        if record.exc_info and not record.exc_text:
            # Formatted here once, so that handlers print this text rather than format the exception again.
            record.exc_text = self.redactor.redact_text(_TRACEBACKS.formatException(record.exc_info))
        return True


_TRACEBACKS = logging.Formatter()


def redact_logs(redactor: Redactor, loggers: Iterable[str]) -> None:
    """Put a :class:`RedactingFilter` with ``redactor`` on each of ``loggers``, in place of one put there
    before (so a process that starts many servers or clients keeps one filter a logger)."""
    for name in loggers:
        logger = logging.getLogger(name)
        for old in [f for f in logger.filters if isinstance(f, RedactingFilter)]:
            logger.removeFilter(old)
        logger.addFilter(RedactingFilter(redactor))
