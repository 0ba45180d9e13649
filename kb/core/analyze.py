"""Entry point of the analysis core: raw log bytes in, `Analysis` out. (PROVISIONAL STUB:
being replaced by the real pipeline; the signature is final.)"""

from __future__ import annotations

import hashlib
import re

from kb.core.records import Analysis, ErrorEvent, Fingerprint

_EXC = re.compile(r"^(?:.*?\] )?([A-Za-z_][\w.]*(?:Error|Exception)): (.*)$", re.M)


def analyze(data: bytes) -> Analysis:
    text = data.decode("utf-8", "replace")
    found = _EXC.findall(text)
    root = ErrorEvent(exception=found[-1][0], message=found[-1][1], confidence=0.5) if found else None
    exc = root.exception if root else ""
    msg = re.sub(r"\d+", "<n>", root.message) if root else ""
    h = hashlib.sha256(f"{exc}|{msg}".encode()).hexdigest()[:32]
    fp = Fingerprint(version="0", hash=h, signature=f"{exc}: {msg}", exception=exc, message_template=msg)
    return Analysis(fingerprint=fp, root_cause=root, lines=text.count("\n"), bytes=len(data))


def redacted_text(data: bytes) -> tuple[str, int]:
    return data.decode("utf-8", "replace"), 0
