"""The version of the rules that decide a crash's identity: the fingerprint version and
a digest of the analysis core's source (detection tables, normalizers, identity). Two
services with the same ruleset give a log the same analysis and fingerprint; stored with
each occurrence, it says which ones a new analyzer could regroup."""

from __future__ import annotations

import hashlib
from functools import cache
from pathlib import Path

from kb.core.fingerprint import VERSION

CORE = Path(__file__).resolve().parents[1] / "core"


@cache
def ruleset() -> str:
    digest = hashlib.sha256()
    for path in sorted(CORE.glob("*.py")):
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return f"v{VERSION}-{digest.hexdigest()[:12]}"
