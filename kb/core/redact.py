"""Secrets out before anything leaves the core: launch commands and env dumps in crash
logs carry HF tokens, API keys and database passwords. Each rule keeps the name of what
was redacted (so the log still reads) and replaces only the value.

Speed: every rule needs one of its `anchors` (literals) on the line. The pre-filter
(kb.core.scan) finds the lines holding any anchor in one pass of C code, and on such a
line one Aho-Corasick pass says which rules can match at all: a line without an anchor
costs nothing here, a line with one runs the one or two rules it may hold. The rules are
written case-sensitively, with the case variants spelled out (see `_cases`), so that a
rule can only match where one of its anchors is: the anchors are a promise, not a guess.

Multi-line secrets (PEM private-key blocks) need state across lines: a `Redactor` keeps
it. After a `-----BEGIN ... PRIVATE KEY-----` line it masks the base64 body lines, which
hold no anchor, until the `-----END ... PRIVATE KEY-----` line (or a line that is not a
body line). Callers that only look at flagged lines must feed it every line while
`Redactor.open` is true (kb.core.redactlog does)."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kb.core import lazyre
from kb.core.lazyre import LazyPattern, lazy

MASK = "***"
_MASKED = r"(?!\*\*\*)"  # a value masked already is not masked (nor counted) again

Replacement = str | Callable[[re.Match[str]], str]


@dataclass(frozen=True)
class SecretRule:
    name: str
    pattern: LazyPattern
    replacement: Replacement  # a template, or a function of the match (returns the match's text to keep it)
    sample: str
    anchors: tuple[str, ...]  # literals: the pattern only matches text holding one of them

    def apply(self, text: str) -> tuple[str, int]:
        if isinstance(self.replacement, str):
            return self.pattern.subn(self.replacement, text)
        changed = 0
        replace = self.replacement

        def counted(match: re.Match[str]) -> str:
            nonlocal changed
            out = replace(match)
            if out != match.group(0):
                changed += 1
            return out

        text = self.pattern.sub(counted, text)
        return text, changed


def _cases(*words: str) -> tuple[str, ...]:
    """The spellings a name takes in logs: lower, UPPER, Capitalized, Title-Per-Part."""
    found: list[str] = []
    for word in words:
        parts = re.split(r"([_-])", word)
        for variant in (word, word.lower(), word.upper(), word[:1].upper() + word[1:].lower(),
                        "".join(p[:1].upper() + p[1:].lower() for p in parts)):
            if variant not in found:
                found.append(variant)
    return tuple(found)


def _alt(variants: Iterable[str]) -> str:
    return "(?:" + "|".join(re.escape(v) for v in sorted(set(variants), key=lambda v: (-len(v), v))) + ")"


# --- the high-entropy rule: a random-looking value next to a key-like name -------------
# Key-like words a name ends with. `key` only after `_`/`-` or in camelCase (`apiKey`):
# `monkey`, `keys`, `key_cache` are not secrets; `tokens`, `tokenizer` never end a name
# with `token` (the word must be followed by the separator).
_WORDS = ("token", "secret", "password", "passwd", "passphrase", "credential", "credentials", "auth")
_SEPARATORS = ("=", ":", "'", '"', " ")
# Names ending with a key-like word that hold no secret: tokenizer special tokens, cache
# and lookup keys, public keys.
_NOT_SECRET_NAME = lazyre.compile(
    r"(?:bos|eos|pad|unk|sep|cls|mask|image|video|audio|start|end|special|placeholder|boi|eoi|vision|"
    r"think|tool|default|next|last|first|stop|sink|max|min|num|n|per|total|sum|count)[_-]?(?:token)$"
    r"|(?:cache|hash|sort|primary|foreign|partition|lookup|dict|idempotency|routing|shard|row|map|group|"
    r"public|sequence|seq|block|prefix|request|req|layer|module|param|state|config|index|attn|kv|"
    r"query|value)[_-]?key$"
    r"|(?:^|[_-])(?:no|disable|disabled|enable|enabled|use|with|without|skip|require|required)[_-]?auth$"
    r"|^(?:oauth|author)$", re.I)
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")
_WORD_ALT = ("(?:(?<![A-Za-z0-9])" + _alt([w for w in _cases(*_WORDS) if not w[:1].isupper() or w.isupper()])
             + "|(?<![A-Z0-9])" + _alt([w for w in _cases(*_WORDS) if w[:1].isupper() and not w.isupper()]) + ")")
_KEY_ALT = r"(?:(?<=[_-])(?:key|KEY|Key)|(?<=[a-z])Key)"
_ENTROPY_PATTERN = (r"(?:" + _WORD_ALT + "|" + _KEY_ALT + r")"
                    r"(['\"]?[ ]*[:=][ ]*['\"]?)" + _MASKED + r"([^\s'\",;}\]\)>|&]{16,})")
_ENTROPY_ANCHORS = (_cases("secret", "passw", "passphrase", "credential") + tuple(
    w + s for w in _cases("token", "auth") for s in _SEPARATORS) + tuple(
    k + s for k in ("_key", "-key", "_KEY", "-KEY", "Key") for s in _SEPARATORS))


def shannon_entropy(value: str) -> float:
    """Bits per character."""
    counts: dict[str, int] = {}
    for char in value:
        counts[char] = counts.get(char, 0) + 1
    size = len(value)
    return -sum(n / size * math.log2(n / size) for n in counts.values())


_SEGMENT = lazyre.compile(r"[^A-Za-z0-9]+")
_HEX = lazyre.compile(r"[0-9a-fA-F]+")


def looks_random(value: str) -> bool:
    """A value a person did not type: 16+ characters of at least two classes (lower,
    upper, digits) spread evenly, or one class with very high entropy. Paths, URLs,
    variables, numbers and words are not."""
    if len(value) < 16 or value.startswith(("/", "./", "~/", "$", "<", "%", "{", "-")) or "://" in value:
        return False
    if value.isdigit() or MASK in value:
        return False
    segments = [part for part in _SEGMENT.split(value) if part]
    if len(segments) >= 3 and max(map(len, segments)) <= 12 and not all(_HEX.fullmatch(p) for p in segments):
        return False  # words and numbers put together: a model id, a version, an identifier
    classes = (any(c.islower() for c in value) + any(c.isupper() for c in value)
               + any(c.isdigit() for c in value))
    entropy = shannon_entropy(value)
    if classes >= 2:
        return entropy >= 3.0
    return len(value) >= 20 and entropy >= 3.7


def _name_before(text: str, end: int) -> str:
    start = end
    while start > 0 and text[start - 1] in _NAME_CHARS:
        start -= 1
    return text[start:end].lstrip(".-")


def _mask_random_value(match: re.Match[str]) -> str:
    whole = match.group(0)
    name = _name_before(match.string, match.start()) + whole[:match.start(1) - match.start()]
    value = match.group(2)
    if _NOT_SECRET_NAME.search(name) or not looks_random(value):
        return whole
    return whole[:match.start(2) - match.start()] + MASK


# --- PEM private-key blocks -------------------------------------------------------------
_PEM_BEGIN = r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----"
_PEM_END = r"-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----"
_PEM_OPENS = lazyre.compile(_PEM_BEGIN + r"[\s'\"`|]*$")  # the body is on the lines after
_PEM_BODY_TOKEN = lazyre.compile(r"(?<![^\s'\"|:>])[A-Za-z0-9+/]+={0,2}(?=[\s'\",\\]*$)")  # the last word
_PEM_BODY_RUN = lazyre.compile(r"(?<![^\s'\"|:>])[A-Za-z0-9+/]{16,}={0,2}(?=[\s'\",\\]|$)")  # lines joined in one
_PEM_HEADER = lazyre.compile(r"(?:Proc-Type|DEK-Info|Comment):|^\s*$")
PEM_MAX_LINES = 400  # body lines of a 16k-bit RSA key are fewer


def _mask_pem_inline(match: re.Match[str]) -> str:
    """A key on one line (a JSON string with `\\n` escapes, as in a GCP service-account
    file): the markers stay, the body between them goes."""
    body = match.group(2)
    if not body.replace("\\n", "").replace("\\r", "").strip(" \t\r'\",`"):
        return match.group(0)  # the body is on the next lines: Redactor's state
    return match.group(1) + MASK + match.group(3)


_URL_USER = r"[^/\s:@'\"]*"
_VALUE = r"[^\s'\",}]+"

SECRET_RULES: tuple[SecretRule, ...] = (
    # name-based rules first: the whole value goes, whatever its format
    SecretRule("pem-private-key", lazy(f"({_PEM_BEGIN})(.*?)({_PEM_END}|$)"), _mask_pem_inline,
               '"private_key": "-----BEGIN PRIVATE KEY-----\\nMIIEvQIBADANBgkqhkiG9w0BAQEF\\n-----END PRIVATE KEY-----\\n"',
               ("PRIVATE KEY",)),
    SecretRule("url-password", lazy(rf"(\b[a-z][a-z0-9+.-]*://{_URL_USER}:){_MASKED}[^@\s/'\"]+@"),
               rf"\g<1>{MASK}@", "redis://:hunter2@cache:6379/0", ("://",)),
    SecretRule("bearer", lazy(rf"(\b[Bb]earer\s+){_MASKED}[A-Za-z0-9._~+/=-]{{8,}}"), rf"\g<1>{MASK}",
               "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.abc.def", ("Bearer", "bearer")),
    SecretRule("authorization-header",
               lazy(r"(\b[Aa]uthorization['\"]?[ ]*[:=][ ]*['\"]?(?:(?:Basic|Token|Digest|Bot|basic|token)[ ]+)?)"
                    + _MASKED + r"(?!(?:Bearer|bearer|Basic|basic|Token|token|Digest|Bot)\b)[^\s'\",}]{6,}"),
               rf"\g<1>{MASK}", "-H 'Authorization: Basic dXNlcjpodW50ZXIy'", ("uthorization",)),
    SecretRule("secret-flag",
               lazy(r"((?<![\w-])--?(?:[A-Za-z0-9]+-)*(?:token|secret|password|passwd|passphrase|api-key|apikey|access-key|"
                    r"secret-key|private-key|auth-key|credentials?)(?:=|['\"]?,?[ ]+)['\"]?)" + _MASKED + r"(?!-)[^\s'\",\]]+"),
               rf"\g<1>{MASK}", "vllm serve m --api-key sk-local-12345 --hf-token hf_x",
               ("-token", "-secret", "-passw", "-passphrase", "-api-key", "-apikey", "-key", "-credential")),
    SecretRule("secret-assignment",
               lazy(r"(\b[A-Za-z0-9_]*(?:TOKEN|_KEY|SECRET|PASSWORD|PASSWD|CREDENTIALS?|_PAT|APIKEY)\b['\"]?\s*[=:]\s*['\"]?)"
                    + _MASKED + r"[^\s'\",}]+"),
               rf"\g<1>{MASK}", "HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyz0123456789",
               ("TOKEN", "_KEY", "SECRET", "PASSW", "CREDENTIAL", "_PAT", "APIKEY")),
    SecretRule("secret-dict-entry",
               lazy(r"(['\"]" + _alt(_cases(
                   "api_key", "api-key", "x-api-key", "apikey", "apiKey", "token", "hf_token", "access_token",
                   "refresh_token", "id_token", "auth_token", "password", "passwd", "secret", "client_secret",
                   "access_key", "secret_key", "private_key_id", "credentials", "ocp-apim-subscription-key"))
                    + r"['\"]\s*:\s*\[?\s*['\"])" + _MASKED + r"[^'\"]+"),
               rf"\g<1>{MASK}", "{'api_key': 'sk-abc123456789'} {\"api-key\": \"0f1e2d3c\"}",
               ("api_key", "api-key", "apikey", "apiKey", "Api_key", "Api-key", "Api-Key", "Api_Key",
                "API_KEY", "API-KEY", "APIKEY", "Apikey", "X-API-KEY", "X-Api-Key", "x-api-key", "X-api-key",
                "token'", 'token"', "TOKEN", "Token'", 'Token"', "passw", "Passw", "PASSW", "secret",
                "Secret", "SECRET", "_key", "_KEY", "_Key", "credentials", "Credentials", "CREDENTIAL",
                "subscription-key", "Subscription-Key", "SUBSCRIPTION-KEY", "Subscription-key")),
    SecretRule("password-assignment",
               lazy(r"(\b[A-Za-z0-9_.-]*" + _alt(_cases("password", "passwd", "passphrase", "secret"))
                    + r"['\"]?[ ]*[=:][ ]*['\"]?)" + _MASKED + r"(?!None\b|null\b|\(|\$\{)[^\s'\",;}&]+"),
               rf"\g<1>{MASK}", "host=db user=kb password=hunter2 dbname=kb",
               tuple(w + s for w in _cases("passw", "passphrase", "secret") for s in ("=", ":", "'", '"', " "))
               + ("passw", "Passw", "PASSW")),
    SecretRule("aws-credentials-file",
               lazy(r"(\b(?:aws_secret_access_key|aws_session_token|aws_secret_key|AWS_SECRET_ACCESS_KEY|"
                    r"AWS_SESSION_TOKEN|AWS_SECRET_KEY)[ \t]*[=:][ \t]*['\"]?)" + _MASKED + r"[^\s'\"]+"),
               rf"\g<1>{MASK}", "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLEKEY",
               ("aws_secret", "aws_session", "AWS_SECRET", "AWS_SESSION")),
    SecretRule("azure-account-key", lazy(r"((?:AccountKey|SharedAccessKey|SharedSecret)=)" + _MASKED + r"[^;\s'\",)]+"),
               rf"\g<1>{MASK}",
               "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MA==;",
               ("AccountKey=", "SharedAccessKey=", "SharedSecret=")),
    SecretRule("azure-sas-signature", lazy(r"([?&;]sig=)" + _MASKED + r"[^&;\s'\"]+"), rf"\g<1>{MASK}",
               "https://acct.blob.core.windows.net/c/b?sv=2022-11-02&se=2025&sig=ab%2Bcd3Ef9GhIJ%3D", ("sig=",)),
    SecretRule("slack-webhook", lazy(r"(https://hooks\.slack\.com/(?:services|workflows|triggers)/)" + _MASKED
                                     + r"[A-Za-z0-9/_-]+"),
               rf"\g<1>{MASK}", "https://hooks.slack.com/services/T0123ABCD/B0456EFGH/abcdefghijklmnopqrstuvwx",
               ("hooks.slack.com",)),
    SecretRule("wandb-login", lazy(r"(\bwandb login(?:[ ]+--?[A-Za-z-]+)*[ ]+['\"]?|\bwandb\.login\([^)]*?key[ ]*=[ ]*['\"])"
                                   + _MASKED + r"(?:[0-9a-fA-F]{40}|[A-Za-z0-9_-]{40,})\b"),
               rf"\g<1>{MASK}", "wandb login 0123456789abcdef0123456789abcdef01234567", ("wandb",)),
    SecretRule("docker-login-password", lazy(r"(\bdocker login\b[^\n]*?[ ](?:-p|--password)[ =]+['\"]?)"
                                             + _MASKED + r"[^\s'\"]+"),
               rf"\g<1>{MASK}", "docker login nvcr.io -u '$oauthtoken' -p bnZhcGktdGVzdGtleQ", ("docker login",)),
    SecretRule("key-like-name", lazy(_ENTROPY_PATTERN), _mask_random_value,
               "client_token: 'Qm9vbGVhbkF1dGhUb2tlbjEyMzQ1Ng'", _ENTROPY_ANCHORS),
    # token formats: found wherever they are
    SecretRule("hf-token", lazy(r"\bhf_[A-Za-z0-9]{20,}\b"), f"hf_{MASK}", "hf_abcdefghijklmnopqrstuvwxyz0123",
               ("hf_",)),
    SecretRule("openai-key", lazy(r"\bsk-[A-Za-z0-9_-]{16,}\b"), f"sk-{MASK}", "sk-proj-abcdefghijklmnop1234",
               ("sk-",)),
    SecretRule("stripe-key", lazy(r"\b([sr]k_(?:live|test)_)[A-Za-z0-9]{16,}\b"), rf"\g<1>{MASK}",
               "sk_live_4eC39HqLyjWDarjtT1zdp7dc", ("sk_live_", "sk_test_", "rk_live_", "rk_test_")),
    SecretRule("aws-access-key", lazy(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"), f"AKIA{MASK}", "AKIAIOSFODNN7EXAMPLE",
               ("AKIA", "ASIA")),
    SecretRule("github-token", lazy(r"\bgh[pousr]_[A-Za-z0-9]{30,}\b"), f"ghp_{MASK}",
               "ghp_abcdefghijklmnopqrstuvwxyz0123456789", ("ghp_", "gho_", "ghu_", "ghs_", "ghr_")),
    SecretRule("github-pat", lazy(r"\bgithub_pat_[A-Za-z0-9_]{22,}"), f"github_pat_{MASK}",
               "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz", ("github_pat_",)),
    SecretRule("gitlab-token", lazy(r"\bgl(pat|dt|rt|ptt|cbt)-[A-Za-z0-9_-]{20,}"), rf"gl\g<1>-{MASK}",
               "glpat-xYz12AbC34dEf56GhI78", ("glpat-", "gldt-", "glrt-", "glptt-", "glcbt-")),
    SecretRule("slack-token", lazy(r"\bxox[abprse]-[A-Za-z0-9-]{10,}\b"), f"xox-{MASK}",
               "xoxb-1234567890-abcdefghij", ("xox",)),
    SecretRule("google-api-key", lazy(r"\bAIza[0-9A-Za-z_-]{35}"), f"AIza{MASK}",
               "AIzaSyA1bC2dE3fG4hI5jK6lM7nO8pQ9rS0tU1v", ("AIza",)),
    SecretRule("google-oauth-token", lazy(r"\bya29\.[0-9A-Za-z_-]{20,}"), f"ya29.{MASK}",
               "ya29.a0AfH6SMBx1y2z3A4B5C6D7E8F9G0", ("ya29.",)),
    SecretRule("jwt", lazy(r"\beyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}"), f"eyJ{MASK}",
               "token eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.c2lnbmF0dXJlXzEyMw", ("eyJ",)),
    SecretRule("ngc-key", lazy(r"\bnvapi-[A-Za-z0-9_-]{20,}"), f"nvapi-{MASK}",
               "nvapi-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789", ("nvapi-",)),
    SecretRule("databricks-token", lazy(r"\bdapi[0-9a-f]{32}(?:-\d+)?\b"), f"dapi{MASK}",
               "dapi0123456789abcdef0123456789abcdef", ("dapi",)),
    SecretRule("npm-token", lazy(r"\bnpm_[A-Za-z0-9]{36}\b"), f"npm_{MASK}",
               "npm_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789", ("npm_",)),
    SecretRule("groq-key", lazy(r"\bgsk_[A-Za-z0-9]{40,}\b"), f"gsk_{MASK}",
               "gsk_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789abcd", ("gsk_",)),
    SecretRule("replicate-token", lazy(r"\br8_[A-Za-z0-9]{30,}\b"), f"r8_{MASK}",
               "r8_AbCdEfGhIjKlMnOpQrStUvWxYz0123456", ("r8_",)),
)

# Cheap test before running the rules on a line: every rule needs one of these literals
# (the pre-filter flags the lines holding any; kb.core.patterns.SECRET_ANCHORS).
# An anchor holding another one adds nothing: a line holding it holds the other too.
_ANCHORS = {a for rule in SECRET_RULES for a in rule.anchors}
QUICK_LITERALS: tuple[str, ...] = tuple(sorted(a for a in _ANCHORS if not any(b != a and b in a for b in _ANCHORS)))


class _Index:
    """Which rules a line may match: one Aho-Corasick pass over its anchors."""

    def __init__(self) -> None:
        self._automaton: Any = None

    def rules(self, text: str) -> list[SecretRule]:
        automaton = self._automaton or self._build()
        found: set[int] = set()
        for _, indices in automaton.iter(text):
            found.update(indices)
        return [SECRET_RULES[i] for i in sorted(found)]

    def any(self, text: str) -> bool:
        automaton = self._automaton or self._build()
        for _ in automaton.iter(text):
            return True
        return False

    def _build(self) -> Any:
        import ahocorasick  # the pre-filter's dependency; only loaded when a line needs it

        by_literal: dict[str, list[int]] = {}
        for index, rule in enumerate(SECRET_RULES):
            for literal in QUICK_LITERALS:  # a rule is tried on any literal its anchors hold
                if any(literal in anchor for anchor in rule.anchors):
                    by_literal.setdefault(literal, []).append(index)
        automaton = ahocorasick.Automaton()
        for literal, indices in by_literal.items():
            automaton.add_word(literal, tuple(indices))
        automaton.make_automaton()
        self._automaton = automaton
        return automaton


_INDEX = _Index()


def may_hold_secret(text: str) -> bool:
    """Whether `text` holds a literal some rule needs (False: no rule can match)."""
    return _INDEX.any(text)


def _apply_rules(text: str) -> tuple[str, int]:
    total = 0
    for rule in _INDEX.rules(text):
        text, count = rule.apply(text)
        total += count
    return text, total


class Redactor:
    """Line-by-line redaction with the state a PEM block needs. Feed it the lines of one
    log in order: every line holding a quick literal, and every line while `open`."""

    __slots__ = ("_pem_left",)

    def __init__(self) -> None:
        self._pem_left = 0  # body lines a PEM block opened on an earlier line may still have

    @property
    def open(self) -> bool:
        """Inside a PEM block: the next line must be fed, whatever it holds."""
        return self._pem_left > 0

    def copy(self) -> Redactor:
        other = Redactor()
        other._pem_left = self._pem_left
        return other

    def line(self, text: str) -> tuple[str, int]:
        """One line (no newline in it) with its secrets masked, and how many."""
        if self._pem_left:
            masked = self._pem_body(text)
            if masked is not None:
                return masked, 0
        if not _INDEX.any(text):
            return text, 0
        out, count = _apply_rules(text)
        if "PRIVATE KEY" in text and _PEM_OPENS.search(text):
            self._pem_left = PEM_MAX_LINES
            count += 1  # the block is one secret, counted where it starts
        return out, count

    def _pem_body(self, text: str) -> str | None:
        """A line inside an open PEM block masked (None: the block ended before it)."""
        self._pem_left -= 1
        if "-----END" in text or "-----BEGIN" in text:
            self._pem_left = 0
            return None
        if _PEM_HEADER.search(text):
            return text
        masked, runs = _PEM_BODY_RUN.subn(MASK, text)
        masked, last = _PEM_BODY_TOKEN.subn(lambda m: m.group(0) if m.group(0) == MASK else MASK, masked, count=1)
        if not runs and not last:
            self._pem_left = 0
            return None
        return masked


def redact(text: str) -> tuple[str, int]:
    """Return `text` with secrets masked and how many were masked (a text of several
    lines is redacted line by line, PEM blocks across them)."""
    if "\n" in text:
        return redact_lines(text)
    if not _INDEX.any(text):
        return text, 0
    return Redactor().line(text)


def redact_lines(text: str) -> tuple[str, int]:
    """`redact` for a whole log: only the lines holding a quick literal (and the lines
    of a PEM block) run the rules."""
    lines = text.split("\n")
    total = 0
    redactor = Redactor()
    quick = _INDEX.any
    for index, line in enumerate(lines):
        if redactor.open or quick(line):
            lines[index], count = redactor.line(line)
            total += count
    return "\n".join(lines), total


def redact_field(value: Any) -> Any:
    """A stored or sent field's value with its secrets masked (non-strings as they are)."""
    if isinstance(value, str):
        return redact(value)[0] if value and _INDEX.any(value) else value
    return value


def redact_fields(values: Mapping[str, Any]) -> dict[str, Any]:
    return {name: redact_field(value) for name, value in values.items()}


def redact_data(value: Any) -> Any:
    """Strings anywhere in JSON-like data (dicts, lists) redacted; dict keys too."""
    if isinstance(value, str):
        return redact_field(value)
    if isinstance(value, Mapping):
        return {redact_field(k): redact_data(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact_data(v) for v in value]
    return value
