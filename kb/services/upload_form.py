"""The request around an upload's log: the log checked as text, the uploader's overrides
parsed and bounded, the Idempotency-Key checked, values clipped to their columns."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kb.core import textlog
from kb.core.redact import redact_field
from kb.services.errors import InvalidInput, NotText, TooLarge
from kb.services.views import OVERRIDE_FIELDS, Overrides

FAILURES = ("exit", "hang", "not_ready")  # why `kb run` uploaded
IDEMPOTENCY_KEY_MAX = 200


def prepare_log(data: bytes, max_bytes: int) -> bytes:
    """The upload as text bytes (kb.core.textlog), its refusal as the service error
    whose HTTP status says why: 400 empty, 413 too large, 422 not text."""
    try:
        return textlog.prepare_log(data, max_bytes)
    except textlog.EmptyLog as exc:
        raise InvalidInput(str(exc)) from None
    except textlog.LogTooLarge as exc:
        raise TooLarge(str(exc)) from None
    except textlog.LogRejected as exc:
        raise NotText(str(exc)) from None


def clip(value: str | None, size: int) -> str | None:
    """Fit a value from the log into its column (Postgres enforces lengths)."""
    return value[:size] if value else value


# Integer overrides and the values they may take (the OpenAPI schema says the same).
INTEGER_OVERRIDES = {"gpu_count": (0, 1_000_000), "tp": (0, 1_000_000), "dp": (0, 1_000_000),
                     "pp": (0, 1_000_000), "ep": (0, 1_000_000), "exit_code": (-(2**31), 2**31 - 1)}
_LENGTHS = {"command": 1000, "cuda_visible_devices": 200, "torch_version": 60}


def parse_overrides(values: Mapping[str, Any]) -> Overrides:
    parsed: dict[str, Any] = {}
    for name in OVERRIDE_FIELDS:
        raw = values.get(name)
        if raw is None:
            continue
        text = str(raw).strip()
        if not text:
            continue
        if name in INTEGER_OVERRIDES:
            try:
                parsed[name] = int(text)
            except ValueError:
                raise InvalidInput(f"{name} must be an integer, got {text[:40]!r}") from None
            low, high = INTEGER_OVERRIDES[name]
            if not low <= parsed[name] <= high:
                raise InvalidInput(f"{name} is out of range: {parsed[name]}")
        elif name == "failure":
            if text not in FAILURES:
                raise InvalidInput(f"failure must be one of {', '.join(FAILURES)}, "
                                   f"got {text[:40]!r}")
            parsed[name] = text
        else:
            # Every text field is stored and shown: the command line `kb run` sends
            # (`env HF_TOKEN=... vllm serve --api-key ...`) most of all. Redacted whole,
            # then cut to its column (a cut could leave half a secret a rule misses).
            parsed[name] = redact_field(text)[:_LENGTHS.get(name, 300)]
    return Overrides(**parsed)


def check_idempotency_key(raw: str | None) -> str | None:
    """The Idempotency-Key header as stored: None when absent or blank, else printable
    ASCII of at most IDEMPOTENCY_KEY_MAX characters (400 otherwise)."""
    key = redact_field((raw or "").strip())
    if not key:
        return None
    if len(key) > IDEMPOTENCY_KEY_MAX:
        raise InvalidInput(f"Idempotency-Key is longer than {IDEMPOTENCY_KEY_MAX} characters")
    if not key.isascii() or not key.isprintable():
        raise InvalidInput("Idempotency-Key must be printable ASCII")
    return key
