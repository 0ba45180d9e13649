"""Secrets out before anything leaves the core: launch commands and env dumps in crash
logs carry HF tokens, API keys and database passwords. Each rule keeps the name of what
was redacted (so the log still reads) and replaces only the value."""

from __future__ import annotations

import re
from dataclasses import dataclass

from kb.core.lazyre import LazyPattern, lazy

MASK = "***"


@dataclass(frozen=True)
class SecretRule:
    name: str
    pattern: LazyPattern
    replacement: str
    sample: str


SECRET_RULES: tuple[SecretRule, ...] = (
    SecretRule("url-password", lazy(r"(\b[a-z][a-z0-9+.-]*://[^/\s:@'\"]+:)[^@\s/'\"]+@"),
               rf"\g<1>{MASK}@", "postgresql://kb:hunter2@db:5432/kb"),
    SecretRule("bearer", lazy(r"(\bBearer\s+)[A-Za-z0-9._~+/=-]{8,}"), rf"\g<1>{MASK}",
               "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.abc.def"),
    SecretRule("api-key-flag", lazy(r"(--api[-_]key[=\s]+['\"]?)[^\s'\"]+"), rf"\g<1>{MASK}",
               "--api-key sk-local-12345"),
    SecretRule("secret-assignment",
               lazy(r"(\b[A-Za-z0-9_]*(?:TOKEN|_KEY|SECRET|PASSWORD|PASSWD)\b['\"]?\s*[=:]\s*['\"]?)(?!\*\*\*)[^\s'\",}]+"),
               rf"\g<1>{MASK}", "HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyz0123456789"),
    SecretRule("secret-dict-entry",
               lazy(r"(['\"](?:api_key|token|hf_token|password|secret|access_key|secret_key)['\"]\s*:\s*['\"])(?!\*\*\*)[^'\"]+", re.I),
               rf"\g<1>{MASK}", "{'api_key': 'sk-abc123456789'}"),
    SecretRule("hf-token", lazy(r"\bhf_[A-Za-z0-9]{20,}\b"), f"hf_{MASK}", "hf_abcdefghijklmnopqrstuvwxyz0123"),
    SecretRule("openai-key", lazy(r"\bsk-[A-Za-z0-9_-]{16,}\b"), f"sk-{MASK}", "sk-proj-abcdefghijklmnop1234"),
    SecretRule("aws-access-key", lazy(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"), f"AKIA{MASK}", "AKIAIOSFODNN7EXAMPLE"),
    SecretRule("github-token", lazy(r"\bgh[pousr]_[A-Za-z0-9]{30,}\b"), f"ghp_{MASK}", "ghp_abcdefghijklmnopqrstuvwxyz0123456789"),
    SecretRule("slack-token", lazy(r"\bxox[abprs]-[A-Za-z0-9-]{10,}\b"), f"xox-{MASK}", "xoxb-1234567890-abcdefghij"),
)

# Cheap test before running the rules on a line: every rule needs one of these literals
# (substring tests are far cheaper than one regex alternation on every kept line).
QUICK_LITERALS = ("hf_", "sk-", "Bearer", "api-key", "api_key", "API_KEY", "TOKEN", "_KEY", "SECRET", "PASSW",
                  "AKIA", "ASIA", "://", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "xox", "token'", 'token"',
                  "password", "Password", "secret", "Secret", "access_key", "secret_key")


def redact_lines(text: str) -> tuple[str, int]:
    """`redact` for a whole log: only the lines holding a quick literal run the rules,
    which keeps a megabyte log in milliseconds."""
    lines = text.split("\n")
    total = 0
    for index, line in enumerate(lines):
        if any(literal in line for literal in QUICK_LITERALS):
            lines[index], count = redact(line)
            total += count
    return "\n".join(lines), total


def redact(text: str) -> tuple[str, int]:
    """Return `text` with secrets masked and how many were masked."""
    if not any(literal in text for literal in QUICK_LITERALS):
        return text, 0
    total = 0
    for rule in SECRET_RULES:
        text, count = rule.pattern.subn(rule.replacement, text)
        total += count
    return text, total
