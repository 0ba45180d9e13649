"""Crash KB: a crash knowledge base for LLM inference engines.

The public Python API (docs/python-api.md)::

    import kb

    analysis = kb.analyze(pathlib.Path("vllm.log"))  # offline: bytes, str or a Path
    with kb.Client("http://127.0.0.1:8000") as client:  # the service
        answer = client.submit(pathlib.Path("vllm.log"))

Names are loaded on first use (module `__getattr__`): `import kb` stays as cheap as it
was, `kb analyze` never loads httpx or the web stack, and `kb.analyze` never loads
httpx."""

from __future__ import annotations

import importlib

# Not `from typing import TYPE_CHECKING`: typing costs `import kb` ~7 ms. Type checkers
# read a module-level TYPE_CHECKING = False as true all the same.
TYPE_CHECKING = False

__version__ = "0.1.0"

# public name -> the module defining it
_EXPORTS = {
    # offline analysis
    "analyze": "kb.api",
    "Analysis": "kb.core.records",
    "ErrorEvent": "kb.core.records",
    "Frame": "kb.core.records",
    "Context": "kb.core.records",
    "Gpu": "kb.core.records",
    "Parallel": "kb.core.records",
    "Speculative": "kb.core.records",
    "Fingerprint": "kb.core.records",
    "Hint": "kb.core.records",
    "Timing": "kb.core.records",
    "PHASES": "kb.core.records",
    "LogRejected": "kb.core.textlog",
    "EmptyLog": "kb.core.textlog",
    "LogTooLarge": "kb.core.textlog",
    "NotTextLog": "kb.core.textlog",
    # the service
    "Client": "kb.client.api",
    "ClientError": "kb.client.errors",
    "Unreachable": "kb.client.errors",
    "Unavailable": "kb.client.errors",
    "Refused": "kb.client.errors",
    "Unauthorized": "kb.client.errors",
    "NotFound": "kb.client.errors",
    # the service's answers (the ones with links: kb.web.links)
    "UploadResult": "kb.web.links",
    "IncidentRef": "kb.web.links",
    "OccurrenceRef": "kb.services.views",
    "MatchView": "kb.services.views",
    "SimilarView": "kb.services.views",
    "FixView": "kb.services.views",
    "RecommendationView": "kb.services.views",
    "IncidentDetail": "kb.web.links",
    "IncidentList": "kb.web.links",
    "IncidentSummary": "kb.web.links",
    "Timeline": "kb.services.views",
    "OccurrenceView": "kb.web.links",
    "LinkedIncident": "kb.web.links",
    "FingerprintView": "kb.services.views",
}

__all__ = list(_EXPORTS)


def __getattr__(name: str) -> object:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'kb' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # the next access is a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})


if TYPE_CHECKING:  # for type checkers and IDEs; never run
    from kb.api import analyze
    from kb.client.api import Client
    from kb.client.errors import ClientError, NotFound, Refused, Unauthorized, Unavailable, Unreachable
    from kb.core.records import (
        PHASES,
        Analysis,
        Context,
        ErrorEvent,
        Fingerprint,
        Frame,
        Gpu,
        Hint,
        Parallel,
        Speculative,
        Timing,
    )
    from kb.core.textlog import EmptyLog, LogRejected, LogTooLarge, NotTextLog
    from kb.services.views import (
        FingerprintView,
        FixView,
        MatchView,
        OccurrenceRef,
        RecommendationView,
        SimilarView,
        Timeline,
    )
    from kb.web.links import (
        IncidentDetail,
        IncidentList,
        IncidentRef,
        IncidentSummary,
        LinkedIncident,
        OccurrenceView,
        UploadResult,
    )
