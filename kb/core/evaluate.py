"""Evaluation of the analyzer and the matcher on labeled cases (format:
shared/corpus/README.md). Pure: the command reads the files and passes them in.

Root cause: the exception type (module path ignored) and the message (whitespace folded;
a label cut shorter than the log, or the reverse, still matches as a prefix). A case
whose log lacks the exception line altogether counts as right when the analyzer says
the log is truncated instead of inventing an answer, or names the message a wrapper
quoted (the type is then the label's guess) ("recoverable" accuracy); the strict figure
is printed beside it.
Grouping is measured through the service (kb.services.evaluation), not here."""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from rapidfuzz import fuzz

from kb.core import lazyre
from kb.core.analyze import analyze, inflate
from kb.core.engines import label_engine
from kb.core.fingerprint import canonical_exception
from kb.core.records import Analysis
from kb.core.split import parse_line

CONTEXT_FIELDS = ("engine", "engine_version", "model", "model_arch", "gpu_name", "gpu_count", "tp", "dp", "pp", "ep", "phase")


@dataclass
class Case:
    id: str
    log: bytes
    label: dict[str, Any]


@dataclass
class CaseResult:
    id: str
    failure_class: str
    exception_ok: bool
    message_ok: bool
    recoverable: bool
    got: str
    expected: str
    # per labeled field: right, wrong, or None when the analysis left it unsaid (excerpts
    # often do not show the model or the GPUs: that is not a wrong answer)
    context: dict[str, bool | None] = field(default_factory=dict)


def _fold(text: str) -> str:
    return re.sub(r"\s+", " ", text or "").strip()


# Log tags some labels keep at the head of the message and others as the exception: the
# same text a person reads, so they are compared without them.
_LOG_TAG = lazyre.compile(r"^(?:\[[\w-]+\]\[(?:ERROR|WARNING|WARN|FATAL)\] ?|\[[a-z0-9_]+\] )+")  # [TensorRT-LLM][ERROR], [c10d]
LOG_TAG_EXCEPTIONS = {"[TensorRT-LLM][ERROR]", "[TRT] [E]"}
# ... and inside it, where a wrapper quotes a tagged line ("forwardAsync function: [TensorRT-LLM][ERROR] CUDA ...")
_INNER_LOG_TAG = lazyre.compile(r"\[[\w-]+\]\[(?:ERROR|WARNING|WARN|FATAL)\] ?")


_DIRECTORIES = lazyre.compile(r"(?<![\w.])/(?:[\w.+-]+/)+")
_ELISION = lazyre.compile(r"\s*(?:\.\.\.|…)")


# Where native code says it failed, which some labels keep and some drop: "ggml-cpu.c:8883: "
# before GGML_ASSERT, TensorRT's "[optimizer.cpp::computeCosts::2011] " before its error,
# NCCL's "misc/shmutils.cc:114 NCCL WARN " before its warning, c10's "[E socket.cpp:860] ".
_LOCATION = lazyre.compile(r"^(?:[\w./\\:-]+\.\w+:\d+: |\[[\w.]+::\w+::\d+\] "
                       r"|(?:[\w./-]+\.\w+:\d+ )?NCCL WARN |\[[IWEF]\S* [\w./-]+\.\w+:\d+\] |[\w./-]+\.\w+:\d+\] "
                       r"|thread '[^']*' panicked at (?:[\w./-]+:\d+:\d+:\s*|'))")  # a Rust panic's where


# A capture's timestamp some labels keep at the head of the line they copied.
_CAPTURE_TIME = lazyre.compile(r"^\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)? ")


def _labeled_message(expected: str) -> str:
    """The message of a label that copied the whole line: the capture's and the logger's
    headers (`ERROR:torch.distributed...:`, `file.cu:12: ERROR: `) read off as the
    analyzer reads them, so the label is compared with what the line says."""
    text = _CAPTURE_TIME.sub("", _fold(expected))
    return parse_line(0, text).body or text


_TYPE_HEAD = lazyre.compile(r"[A-Za-z_]\w*(?:Error|Exception|Warning)\s*:\s*$")


def message_matches(got: str, expected: str) -> bool:
    a, b = _LOG_TAG.sub("", _fold(got)), _LOG_TAG.sub("", _labeled_message(expected))
    a, b = _LOG_TAG.sub("", _LOCATION.sub("", a)), _LOG_TAG.sub("", _LOCATION.sub("", b))
    a, b = _INNER_LOG_TAG.sub("", a), _INNER_LOG_TAG.sub("", b)
    if a != b:  # a label that shortened a path to its file's name
        a, b = _DIRECTORIES.sub("", a), _DIRECTORIES.sub("", b)
    if a == b:
        return True
    if min(len(a), len(b)) >= 20 and (a.startswith(b) or b.startswith(a) or a.endswith(b)):
        return True  # the same line, cut by the labeler, or behind its callers' prefixes
    if len(a) >= 20 and b.endswith(a) and not _TYPE_HEAD.search(b[:-len(a)]):
        return True  # the label kept the line's head (a location, a shell's "line 40: 7"), not a type
    if len(b) >= 40 and b in a:
        return True  # ... or both: a wrapper's words before it, the labeler's cut after it
    elided = _ELISION.split(b, 1)[0]  # a label that abbreviates a long message: "{'a', 'b', ...}"
    if elided != b and len(elided) >= 20 and a.startswith(elided):
        return True
    return bool(a and b) and fuzz.ratio(a, b) >= 90


def _context_value(analysis: Analysis, name: str) -> Any:
    ctx = analysis.context
    return {
        "engine": ctx.engine, "engine_version": ctx.engine_version, "model": ctx.model, "model_arch": ctx.model_arch,
        "gpu_name": ctx.gpu.name, "gpu_count": ctx.gpu.count, "tp": ctx.parallel.tp, "dp": ctx.parallel.dp,
        "pp": ctx.parallel.pp, "ep": ctx.parallel.ep, "phase": analysis.phase,
    }[name]


def _label_value(label: dict[str, Any], name: str) -> Any:
    if name in ("gpu_name", "gpu_count"):
        gpu = label.get("gpu") or {}
        return gpu.get("name" if name == "gpu_name" else "count")
    if name in ("tp", "dp", "pp", "ep"):
        return (label.get("parallel") or {}).get(name)
    return label.get(name)


def _context_equal(name: str, got: Any, expected: Any) -> bool:
    if got is None:
        return False
    if name == "engine":  # the corpus labels llama.cpp/ollama and Ray cases `other`
        return label_engine(str(got)) == label_engine(str(expected))
    if name in ("gpu_name", "model", "engine_version"):
        g, e = str(got).lower(), str(expected).lower()
        return g == e or e in g or g in e
    return str(got).lower() == str(expected).lower()


_PYDANTIC_INNER = lazyre.compile(r"\b(Value|Assertion) error, (.+?)(?: \[type=\w+_error\b.*)?$", re.S)


def _descriptive(kind: str) -> bool:
    """A label's kind for a non-Python error is free text ("NCCL timeout"); a class name
    ("torch.OutOfMemoryError", "c10::DistBackendError") or a signal is exact."""
    kind = kind.strip()
    # a kind in words ("NCCL timeout") or one lowercase word ("panic"): no class is spelled so
    return (" " in kind or kind.isalpha() and kind.islower()) and kind not in LOG_TAG_EXCEPTIONS


# Kinds of the analyzer that name no type: an ERROR line, a C function's failure line. The
# log printed no type there (a label's type is then the labeler's knowledge), so the
# message decides.
_UNTYPED_KINDS = frozenset({"log_error", "native"})


def _kinds_agree(got: str, want: str, got_kind: str) -> bool:
    """Descriptive kinds agree when one's words hold the other's ("NCCL timeout" and
    "NCCL watchdog timeout"); the analyzer's "logged error" names no kind, so the
    message decides."""
    a, b = set(re.findall(r"\w+", got.lower())), set(re.findall(r"\w+", want.lower()))
    return got_kind in _UNTYPED_KINDS or bool(a and b) and (a <= b or b <= a)


def _root_matches(root, expected: dict[str, Any]) -> tuple[bool, bool]:
    """(exception right, message right) of the analyzer's root cause against one label.
    A label whose exception is only a log tag names no kind: the message decides. A
    label that keeps pydantic's ValidationError also names the error it wraps, which is
    what the analyzer reports (kb.core.tracebacks._unwrap_validation_error)."""
    want = expected.get("exception") or ""
    if _descriptive(want):  # "NCCL timeout", "linker error": free text, words not spelling
        said = expected.get("message") or ""
        # the error's own line may repeat its kind ("CUDA error: out of memory"), the label not
        # ... or the label's message may keep the analyzer's kind ("HSA_STATUS_ERROR_X: text")
        message_ok = message_matches(root.message, said) or (
            root.message.startswith(f"{root.exception}: ") and message_matches(root.message[len(root.exception) + 2:], said)
        ) or bool(root.exception) and message_matches(f"{root.exception}: {root.message}", said) or (
            # ... in the log's own capitals ("CUDA Error: no kernel image", kind "CUDA error")
            bool(root.exception) and said[:len(root.exception) + 2].lower() == f"{root.exception}: ".lower()
            and message_matches(root.message, said[len(root.exception) + 2:]))
        # a non-Python error is identified by its message (shared/corpus/README.md): two
        # descriptive kinds for one line ("CUDA out of memory", "CUDA error") both hold
        return (_kinds_agree(root.exception, want, root.kind) or (root.kind != "python" and message_ok)
                or (not root.exception and root.truncated and message_ok),  # its type cut, as below
                message_ok)
    inner = _PYDANTIC_INNER.search(expected.get("message") or "") if want.endswith("ValidationError") else None
    if inner is not None and canonical_exception(root.exception) != canonical_exception(want):
        expected = {"exception": f"{inner.group(1)}Error", "message": inner.group(2)}
        want = expected["exception"]
    exception_ok = canonical_exception(root.exception) == canonical_exception(want) or (
        want in LOG_TAG_EXCEPTIONS and root.kind != "python") or root.kind in _UNTYPED_KINDS or (
        not root.exception and root.truncated)  # a cut traceback whose text its header kept
    message = expected.get("message") or ""
    short = want.rpartition(".")[2]
    if short and re.match(rf"(?:[\w.]*\.)?{re.escape(short)}: ", message):
        # a label that repeats the type in the message (which the error's own line may too)
        return exception_ok, (message_matches(root.message, message.partition(f"{short}: ")[2])
                              or message_matches(root.message, message))
    return exception_ok, message_matches(root.message, message)


def evaluate_case(case: Case, analysis: Analysis) -> CaseResult:
    expected = case.label.get("root_cause") or {}
    root = analysis.root_cause
    got_exc = root.exception if root else ""
    got_msg = root.message if root else ""
    exception_ok = message_ok = False
    if root is not None:
        for label in [expected, *(case.label.get("root_cause_alternates") or [])]:
            exc_ok, msg_ok = _root_matches(root, label)
            if exc_ok and msg_ok or (not exception_ok and not message_ok):
                exception_ok, message_ok = exc_ok, msg_ok
            if exc_ok and msg_ok:
                break
    text = case.log.decode("utf-8", "replace")
    recoverable = exception_ok and message_ok
    if not recoverable and case.label.get("log_is_truncated") and message_ok:
        recoverable = True  # the exception line is not in the excerpt: its type is the label's guess
    if not recoverable and case.label.get("log_is_truncated") and (
            (root is not None and root.truncated) or analysis.verdict == "not_captured"):
        # the exception line is not in the excerpt: the honest answer is "truncated"
        head = _fold(expected.get("message") or "")[:40]
        recoverable = not head or head not in _fold(text)  # a label without a message: nothing to find
    result = CaseResult(case.id, case.label.get("failure_class", "?"), exception_ok, message_ok, recoverable,
                        got=f"{got_exc}: {_fold(got_msg)[:100]}", expected=f"{expected.get('exception')}: {_fold(expected.get('message') or '')[:100]}")
    for name in CONTEXT_FIELDS:
        want = _label_value(case.label, name)
        if want is not None:
            got = _context_value(analysis, name)
            if got == "unknown" != want:  # the phase an excerpt does not show
                got = None
            result.context[name] = None if got is None else _context_equal(name, got, want)
    return result


def evaluate(cases: list[Case]) -> dict[str, Any]:
    analyses = {case.id: analyze(case.log) for case in cases}
    results = [evaluate_case(case, analyses[case.id]) for case in cases]
    by_id = {r.id: r for r in results}

    report: dict[str, Any] = {"cases": len(results)}
    n = len(results) or 1
    report["root_cause_strict"] = sum(r.exception_ok and r.message_ok for r in results) / n
    report["root_cause"] = sum(r.recoverable for r in results) / n
    report["exception_type"] = sum(r.exception_ok for r in results) / n
    fields: dict[str, list[bool | None]] = defaultdict(list)
    for r in results:
        for name, ok in r.context.items():
            fields[name].append(ok)
    # (share right, labeled cases, wrong answers): a wrong value misleads, an unsaid one does not
    report["context"] = {name: (v.count(True) / len(v), len(v), v.count(False)) for name, v in fields.items()}
    report["results"] = results
    report["by_id"] = by_id
    return report


def evaluate_shapes(cases: list[Case]) -> dict[str, dict[str, float]]:
    """Each case re-captured in every capture shape (kb.core.shapes): root-cause accuracy
    per shape, and how often the answer (root cause and fingerprint) equals the plain
    log's. The capture layer is right when every shape is within a point of plain. Last,
    `buried-2mb`: each case in 2 MB of launch noise (kb.core.noise), compared on the root
    cause only (the noise is a vLLM launch's, so the context it adds is its own)."""
    from kb.core.noise import bury
    from kb.core.shapes import SHAPES, recapture

    plain = {case.id: analyze(case.log) for case in cases}
    report: dict[str, dict[str, float]] = {
        "plain": {"root_cause": sum(evaluate_case(c, plain[c.id]).recoverable for c in cases) / (len(cases) or 1),
                  "same_as_plain": 1.0}}
    for shape in SHAPES:
        right = same = 0
        for seed, case in enumerate(cases):
            shaped = analyze(recapture(inflate(case.log), shape, seed=seed))
            right += evaluate_case(case, shaped).recoverable
            same += _same_answer(shaped, plain[case.id])
        report[shape] = {"root_cause": right / (len(cases) or 1), "same_as_plain": same / (len(cases) or 1)}
    right = same_root = 0
    for seed, case in enumerate(cases):  # the same crash in 2 MB of launch noise
        buried = analyze(bury(inflate(case.log), seed=seed))
        right += evaluate_case(case, buried).recoverable
        same_root += _same_root(buried, plain[case.id])
    report["buried-2mb"] = {"root_cause": right / (len(cases) or 1), "same_as_plain": same_root / (len(cases) or 1)}
    return report


def _same_root(a: Analysis, b: Analysis) -> bool:
    key = (lambda r: None if r is None else (r.exception, _fold(r.message)))
    return key(a.root_cause) == key(b.root_cause)


def _same_answer(a: Analysis, b: Analysis) -> bool:
    return _same_root(a, b) and a.fingerprint.hash == b.fingerprint.hash
