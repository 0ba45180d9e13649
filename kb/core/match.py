"""How alike two crashes are: the error (exception type, normalized message, frames)
decides, context (engine, version distance, architecture, GPU family, topology, phase)
weighs. Pure, so the service, the CLI and the evaluation share one policy.

Score 0-100 with tiers: `known` (>= KNOWN_THRESHOLD): the same incident; `similar` (>=
SIMILAR_THRESHOLD): worth showing beside the answer, never merged automatically. A crash
of another engine is never `known` automatically: its fixes are another engine's flags.
The thresholds are chosen by cross-validation on the labeled corpus (`kb eval
--calibrate` prints the figures behind them)."""

from __future__ import annotations

import re
from dataclasses import replace
from difflib import SequenceMatcher

from rapidfuzz import fuzz, utils
from rapidfuzz.distance import Levenshtein

from kb.core import lazyre
from kb.core.comparable import carried_error, comparable
from kb.core.engines import compatible
from kb.core.fingerprint import CRASH_SIGNALS, VALUE_ONLY, canonical_exception, names_no_kernel
from kb.core.gpus import gpu_family
from kb.core.patterns import NCCL_RESULT
from kb.core.recall import UNIFORM, TermWeights, clause_tails, terms
from kb.core.records import LOGGED_ERROR, CrashFeatures, MatchScore
from kb.core.tracebacks import KERNEL_FILE

KNOWN_THRESHOLD = 92.0
SIMILAR_THRESHOLD = 55.0
ALIAS_THRESHOLD = 96.0  # a fuzzy "known" this sure routes its fingerprint to the incident for good

# weights of the crash itself (sum 1) when both sides have frames / when one has none
_WITH_FRAMES = {"exception": 0.25, "message": 0.55, "frames": 0.20}
_WITHOUT_FRAMES = {"exception": 0.30, "message": 0.70}
# a crash signal's message is the signal's name: where it crashed tells crashes apart
_CRASH_SITE = {"exception": 0.20, "message": 0.20, "frames": 0.60}
# a message that is only a value (raise_site_similarity): type and site
_VALUE_SITE = {"exception": 0.40, "frames": 0.60}
# multiplicative context penalties (only when both sides state the value)
# Error-code slots: a message naming one value of a closed set of error codes is another
# crash than one naming another value, however alike the rest reads ("NCCL error ...,
# unhandled cuda error" vs "..., unhandled system error": one word apart, two causes).
_CODE_SLOTS = (
    # (not a CUDA error NCCL quotes as its last error: "Cuda failure 1 'invalid argument'")
    ("NCCL result", lazyre.compile(
        r"(?<!['‘])\b(unhandled cuda error|unhandled system error|internal (?:check )?(?:error|failure)|invalid usage|"
        r"invalid argument|remote process exited|ncclUnhandledCudaError|ncclSystemError|ncclInternalError|"
        r"ncclInvalidUsage|ncclInvalidArgument|ncclRemoteError)\b", re.I)),
    ("collective", lazyre.compile(r"\bSeqNum=(<first>|<n>)")),  # the first one, or a later one
    # an HTTP status says what the server refused: a token (401), a gated repo (403), a
    # missing file (404), an outage (5xx)
    ("HTTP status", lazyre.compile(r"\b(?:([1-5]\d\d) (?:Client|Server) Error|HTTP Error ([1-5]\d\d))\b")),
    # a runtime's numeric error code (Ascend ACL's "error code:507035" or "runtime result =
    # 507018", a driver's "result=1" or "status=4", SYCL's "Native API returns: 20"): one
    # stream synchronize failing with 507035 and one with 507018 failed differently
    ("error code", lazyre.compile(r"\b(?:error code\s*[:=]?|result\s*=|returns:|status\s*[:=])\s*(-?\d+)\b", re.I)),
    # the library the loader could not open is what is missing (libcuda: no driver; libcudart:
    # no CUDA runtime of that major), however alike the rest of the sentence
    ("shared library", lazyre.compile(r"\b(lib[\w+-]+)(?:\.so[\w.]*)?: cannot open shared object file")),
    ("CUDA error", lazyre.compile(r"\bCUDA error: ([a-z][a-z -]*?[a-z])(?= CUDA kernel errors| Compile with| For debugging|[^a-z -]|$)",
                              re.I)),
    # The operating system's reason after an errno, however the error prints it
    # (`[Errno <n>] Address already in use`, `(errno: <n> - Permission denied)`,
    # `errno=<n> Connection refused`): one bind failing on a taken port and one on a
    # privileged port read alike but for these words. The number is normalized away.
    ("OS error", lazyre.compile(r"\b[Ee]rrno\]?[:=]? ?<n>\]?(?: -)? ([A-Za-z][A-Za-z' ]*[A-Za-z])")),
    ("OS error", lazyre.compile(r"\bname: (E[A-Z]{3,})\b")),  # torch 2.4+: `code: -98, name: EADDRINUSE`
)
_ENGINE_DIFFERS = 0.12
_PHASE_DIFFERS = 0.05  # a soft term: phase guesses are often wrong, and the hash no longer splits by phase
_ARCH_DIFFERS = 0.03
_GPU_FAMILY_DIFFERS = 0.03
_TOPOLOGY_DIFFERS = 0.02
_VERSION_STEP = 0.01  # per minor version apart, capped
_VERSION_CAP = 0.05
# How much the rare-term overlap (kb.core.recall.TermWeights) moves the text similarity:
# 0 is the edit distance alone, 1 lets two texts that share only boilerplate fall to 0.
TERM_MIX = 0.5
_CUT_PARTIAL = 95.0  # one text is (nearly) contained in the other: cut by a viewer
_GENERIC_TERMS = 2  # a message with this few terms of its own ("<n> is not divisible by <n>") names no cause
_FRAMES_APART = 50.0  # frame similarity below this: raised from other code
_STATEMENT_WORDS = 5  # a first sentence this long says what went wrong on its own
_STATEMENT_TRUST = 0.97  # statements alike, advice unknown: a shade short of the whole text alike
_CLAUSES_TRIED = 2  # leading clauses of context set aside, outermost first


def message_similarity(a: str, b: str, weights: TermWeights = UNIFORM, mix: float = TERM_MIX) -> float:
    """0-100: the edit-distance similarity of the two texts, scaled by how much of their
    rare terms they share, so "attention heads ... divisible by tensor parallel size" and
    "experts ... divisible by expert parallel size" are apart although most characters
    agree. Messages are often cut by viewers: a long common prefix counts fully, and the
    shorter text's terms are then compared with the other's alone."""
    if not a or not b:
        return 0.0  # an empty message (truncated log) is evidence of nothing
    if a == b:
        return 100.0
    a, b = without_value_reports(comparable(a), comparable(b))
    if a == b:
        return 100.0
    head_a, head_b = _statement(a), _statement(b)
    whole = _text_similarity(a, b, head_a, head_b, weights, mix)
    if _detail_added(a, b) or _detail_added(b, a):
        # a release or a tool that adds a clause to the same error ("none_dealloc:
        # deallocating None" gained ": bug likely caused by a refcount error in a C
        # extension"; some linkers add the errno text to "cannot find -lcuda")
        whole = max(whole, _STATEMENT_TRUST * 100)
    if head_a != a and head_b != b:
        # Engines reword the advice and detail after an error between releases ("To allow
        # overriding this maximum, set ..." became "This may lead to incorrect model outputs
        # ..."; torch's OOM text grew sentences): two errors whose statements agree are one
        # error whatever follows. A short statement ("CUDA out of memory.") is not enough:
        # the detail after it is what tells such crashes apart.
        if min(len(head_a.split()), len(head_b.split())) >= _STATEMENT_WORDS:
            whole = max(whole, _STATEMENT_TRUST * _text_similarity(head_a, head_b, head_a, head_b, weights, mix))
    if whole < _STATEMENT_TRUST * 100:
        # One text says what was being done before the error and the other not (a
        # release that prefixed ">- DeepSpeed Op Builder: ", a launcher's "Failed to load
        # x: "): the error is the statement after that clause, compared whole or cut.
        # Only a clause the other text lacks, opening where the statement does: two
        # texts with other clauses ("libcudart.so: cannot open ..." and "libnccl.so:
        # cannot open ...") differ in what the clause names.
        for text, other, head in ((a, b, head_b), (b, a, head_a)):
            for tail in clause_tails(text)[:_CLAUSES_TRIED]:
                if len(tail.split()) >= _STATEMENT_WORDS and _opening(tail) == _opening(other):
                    whole = max(whole, _STATEMENT_TRUST * _text_similarity(
                        tail, other, _statement(tail), head, weights, mix))
    return whole


def _text_similarity(a: str, b: str, head_a: str, head_b: str, weights: TermWeights, mix: float) -> float:
    """The edit-distance similarity scaled by the rare-term overlap; `head_a`/`head_b` are
    the texts' first sentences (_statement)."""
    ratio = fuzz.ratio(a, b)
    shorter = min(len(a), len(b))
    partial = 100.0 if _cut_mid_word(a, b) else fuzz.partial_ratio(a, b) if shorter >= 40 else 0.0
    ratio = max(ratio, partial * 0.97)
    if min(len(head_a.split()), len(head_b.split())) >= _STATEMENT_WORDS:
        # the same error wrapped in more words by another engine or launcher; only the
        # statement counts here, not the advice that follows ("Try increasing ...")
        ratio = max(ratio, fuzz.token_set_ratio(head_a, head_b, processor=utils.default_process) * 0.9)
    overlap = term_overlap(a, b, weights, cut=partial >= _CUT_PARTIAL)
    return ratio * (1 - mix + mix * overlap)


_CUT_WORDS = 3  # a text cut inside a word after this many words is the other one, cut


def _cut_mid_word(a: str, b: str) -> bool:
    """One text is the other's start, ended inside a word ("out of resource: shared me"):
    a viewer cut it, whatever its length (a whole message ends at a word's end)."""
    short, long = (a, b) if len(a) < len(b) else (b, a)
    return (len(short.split()) >= _CUT_WORDS and long.startswith(short)
            and short[-1:].isalnum() and long[len(short):len(short) + 1].isalnum())


def term_overlap(a: str, b: str, weights: TermWeights = UNIFORM, *, cut: bool = False) -> float:
    """0-1: the weight of the terms both texts hold over the weight of all their terms
    (over the shorter text's terms alone when one was cut)."""
    terms_a, terms_b = terms(a), terms(b)
    if not terms_a or not terms_b:
        return 1.0  # nothing but placeholders and punctuation: the edit distance decides
    if cut:  # the shorter text's last word may be cut too: a prefix of a word counts
        smaller, larger = (terms_a, terms_b) if len(a) <= len(b) else (terms_b, terms_a)
        held = [t for t in smaller if t in larger or any(u.startswith(t) for u in larger)]
        return sum(weights.weight(t) for t in held) / sum(weights.weight(t) for t in smaller)
    shared = sum(weights.weight(t) for t in terms_a & terms_b)
    return shared / sum(weights.weight(t) for t in terms_a | terms_b)


_SENTENCE_END = lazyre.compile(r"(?<=[.!?])\s+")
_PLACEHOLDER = lazyre.compile(r"<[a-z]+>")
_SHARED_SENTENCES = 3  # a statement and its detail: fewer is too little to call two texts one form


def without_value_reports(a: str, b: str) -> tuple[str, str]:
    """Two texts of one form with the sentences that only report this run's values left
    out where one text has them and the other not: torch's OOM text lists "Process <n>
    has <size> memory in use." once per other process on the GPU, and adds "Including
    non-PyTorch memory, ..." in some releases; neither says why memory ran out. Applies
    only when the texts open with the same sentence and hold three sentences alike; a
    sentence without a placeholder always stays (it is wording, not a value), and so does
    one the other text has another version of (aligned as sequences). A text cut
    at the template's length ends in a partial sentence: cut both to the shorter."""
    sentences_a, sentences_b = _SENTENCE_END.split(a), _SENTENCE_END.split(b)
    if sentences_a[0] != sentences_b[0] or min(len(sentences_a), len(sentences_b)) < _SHARED_SENTENCES:
        return a, b
    if not a.endswith((".", "!", "?")) and not b.endswith((".", "!", "?")):
        shorter, longer = sorted((sentences_a[-1], sentences_b[-1]), key=len)
        if longer.startswith(shorter):
            sentences_a[-1] = sentences_b[-1] = shorter
    kept_a, kept_b = list(sentences_a), list(sentences_b)
    shared = 0
    # aligned as sequences: a sentence only one text has (inserted, not replaced) is optional
    for op, a1, a2, b1, b2 in SequenceMatcher(None, sentences_a, sentences_b, autojunk=False).get_opcodes():
        if op == "equal":
            shared += a2 - a1
        elif op == "delete" and all(_PLACEHOLDER.search(s) for s in sentences_a[a1:a2]):
            kept_a[a1:a2] = [""] * (a2 - a1)
        elif op == "insert" and all(_PLACEHOLDER.search(s) for s in sentences_b[b1:b2]):
            kept_b[b1:b2] = [""] * (b2 - b1)
        elif op == "replace" and all(_PLACEHOLDER.search(s) for s in sentences_a[a1:a2] + sentences_b[b1:b2]) \
                and not {_opening(s) for s in sentences_a[a1:a2]} & {_opening(s) for s in sentences_b[b1:b2]}:
            # one optional sentence in place of another, not two versions of one sentence
            kept_a[a1:a2], kept_b[b1:b2] = [""] * (a2 - a1), [""] * (b2 - b1)
    if shared < _SHARED_SENTENCES:
        return a, b
    return " ".join(s for s in kept_a if s), " ".join(s for s in kept_b if s)


def _detail_added(short: str, long: str) -> bool:
    """`long` is `short` and then a clause of detail (after ": ", "; ", a sentence end or in
    parentheses, or a result code and its name: "was found -46 (PI_ERROR_INVALID_KERNEL_NAME)"),
    and `short` says enough on its own (more terms than a generic message)."""
    added = long[len(short):]
    return (len(long) > len(short) and long.startswith(short)
            and (added[:2] in (": ", "; ", ". ", " (") or added.startswith(" <n> ("))
            and len(terms(short)) > _GENERIC_TERMS)


def _opening(sentence: str) -> str:
    """A sentence's first three words: two versions of one sentence begin alike."""
    return " ".join(sentence.split()[:3])


def _statement(message: str) -> str:
    """The first sentence of a message: what went wrong, before any advice."""
    return _SENTENCE_END.split(message, maxsplit=1)[0]


# A native error's kind and the Python exception that carries the same text: the loader's
# "undefined symbol" is an ImportError when Python imported the library and a bare line
# when a C++ server (Triton's backends) or a wrapper that kept only the text printed it.
_SURFACES_AS = (
    frozenset({"dynamic loader error", "ImportError", "OSError"}),
    frozenset({"CUDA out of memory", "OutOfMemoryError"}),
    # the watchdog's own line, and torch's DistBackendError that quotes it
    frozenset({"NCCL watchdog timeout", "DistBackendError"}),
    # TensorRT-LLM's C++ exception, and the RuntimeError pybind11 turns it into in Python
    # ("[TensorRT-LLM][ERROR] Assertion failed: ..." either way)
    frozenset({"TllmException", "RuntimeError"}),
    # torch raises a CUDA (HIP) runtime error as RuntimeError("CUDA error: ...") (AcceleratorError
    # since 2.8); a C++ thread's c10::Error (the NCCL watchdog's) is printed without a type
    frozenset({"CUDA error", "HIP error", "RuntimeError", "AcceleratorError"}),
    # vLLM's and SGLang's pynccl raise RuntimeError("NCCL error: <result>"); a logger that
    # kept only str(e) ("while processing method init_device: NCCL error: ...") gives the kind
    frozenset({"NCCL error", "RuntimeError"}),
)


# Errors a library re-typed between releases, raised from the same place with the same
# text: torch's RuntimeError became DistBackendError, DistNetworkError (2.2), OutOfMemoryError
# (2.1) and AcceleratorError (2.8), each a subclass of it. A subclass and its old base are
# one type here; two subclasses of one base are not.
_RETYPED_FROM = {"DistBackendError": "RuntimeError", "DistNetworkError": "RuntimeError",
                 "DistStoreError": "RuntimeError", "OutOfMemoryError": "RuntimeError",
                 "AcceleratorError": "RuntimeError"}


def _surface_together(a: str, b: str) -> bool:
    """Canonical names `a` and `b` are one error as printed and as raised (_SURFACES_AS)."""
    return any(a in kinds and b in kinds for kinds in _SURFACES_AS)


def _surfaced(a: str, b: str) -> bool:
    """Two names of one error only as a native kind (words: "CUDA error") and the Python
    type that carries it (_SURFACES_AS), not as one type."""
    a, b = canonical_exception(a), canonical_exception(b)
    return a != b and (" " in a) != (" " in b) and _surface_together(a, b)


def exception_similarity(a: str, b: str) -> float:
    """100 for one type (a moved module or namespace is the same type, so is a type a
    library split off its old base; a native error's kind is the Python exception that
    surfaces it), else 0."""
    a, b = canonical_exception(a), canonical_exception(b)
    if a and (a == b or _RETYPED_FROM.get(a) == b or _RETYPED_FROM.get(b) == a
              or _surface_together(a, b)
              # the kind "NCCL error" a C++ caller's line gets is any NCCL result's name, and
              # torch's DistBackendError relays any NCCL result (its text says which)
              or {a, b} & {"NCCL error", "DistBackendError"} and (NCCL_RESULT.match(a) or NCCL_RESULT.match(b))):
        return 100.0
    return 0.0


def frame_similarity(a: list[str], b: list[str]) -> float:
    """Edit distance over frame sequences, aligned at the raise (the end)."""
    if not a or not b:
        return 0.0
    functions_a = [f.rsplit(":", 1)[-1] for f in a]
    functions_b = [f.rsplit(":", 1)[-1] for f in b]
    return max(Levenshtein.normalized_similarity(a, b), 0.9 * Levenshtein.normalized_similarity(functions_a, functions_b)) * 100


def raise_site_similarity(a: list[str], b: list[str]) -> float:
    """0-100: how much of the raising library's own frames nearest the raise (the run of
    frames, from the last, in the top-level package of the last) the two stacks share,
    aligned at the raise; 100 when the shorter run is all shared. Callers in user code
    differ between reports and are not the site."""
    run_a, run_b = _library_run(a), _library_run(b)
    if not run_a or not run_b:
        return 0.0
    return _innermost_shared(run_a, run_b)


def _innermost_shared(a: list[str], b: list[str]) -> float:
    """0-100: how many frames, from the innermost, the two stacks share, over the shorter
    stack's length."""
    shared = 0
    for frame_a, frame_b in zip(reversed(a), reversed(b)):
        if frame_a != frame_b:
            break
        shared += 1
    return 100.0 * shared / min(len(a), len(b))


def _library_run(frames: list[str]) -> list[str]:
    package = frames[-1].split("/", 1)[0] if frames else ""
    run: list[str] = []
    for frame in reversed(frames):
        if frame.split("/", 1)[0] != package:
            break
        run.append(frame)
    return run[::-1]


# torch's check that every rank runs the same collective (TORCH_DISTRIBUTED_DEBUG=DETAIL)
# names the two it found: which ones disagree is the error (ALLREDUCE vs BROADCAST, a
# checkpoint's broadcast on one rank; ALLREDUCE vs GATHER, another code path), however
# alike the record around them reads. (A timed-out WorkNCCL's op is only what was pending.)
_MISMATCHED_COLLECTIVES = "mismatch between collectives"
_OP_TYPE = lazyre.compile(r"\bOpType=([A-Z_]+)")


# A mapping printed in the message ("resource request {'node:<ip>': <n>, 'GPU': <n>}",
# "unexpected keys {'lm_head.weight': ...}"): its keys name what was asked for or missing,
# its values are this run's
_MAPPING = lazyre.compile(r"\{([^{}]{1,2000})\}")
_MAPPING_KEY = lazyre.compile(r"""(?:^|,\s*)['"]([^'"]{1,80})['"]\s*:""")


def _mapping_keys(text: str) -> frozenset[str]:
    mapping = _MAPPING.search(text)
    return frozenset(key.lower() for key in _MAPPING_KEY.findall(mapping.group(1))) if mapping else frozenset()


def _code_pairs(a: str, b: str) -> list[tuple[str, str, str]]:
    """The error-code slots both messages fill, with different values."""
    out = []
    for slot, pattern in _CODE_SLOTS:
        found_a, found_b = pattern.search(a), pattern.search(b)
        if found_a and found_b:
            value_a, value_b = (next(v for v in found.groups() if v is not None).lower() for found in (found_a, found_b))
            if value_a != value_b:
                out.append((slot, value_a, value_b))
    keys_a, keys_b = _mapping_keys(a), _mapping_keys(b)
    if keys_a and keys_b and keys_a != keys_b:
        out.append(("keys of the printed mapping", "+".join(sorted(keys_a)), "+".join(sorted(keys_b))))
    if _MISMATCHED_COLLECTIVES in a and _MISMATCHED_COLLECTIVES in b:
        ops_a, ops_b = ("+".join(sorted(set(_OP_TYPE.findall(text)))) for text in (a, b))
        if ops_a and ops_b and ops_a != ops_b:
            out.append(("mismatched collectives", ops_a, ops_b))
    return out


# A token that names a thing: an acronym (UVA, NCCL), a code identifier (num_gpu_blocks,
# sm90, cudaMalloc)
_NAMING_TOKEN = lazyre.compile(r"\b(?:[A-Z]{2,}[A-Z0-9]*|[a-z]+_[a-z0-9_]+|[A-Za-z]+[0-9]\w*|[a-z]+[A-Z]\w*)\b")


def _generic(template: str) -> bool:
    """A message of few words that names nothing ("<n> is not divisible by <n>",
    "Permission denied") says nothing of what failed: where it was raised must say it. A
    short message that names a thing ("UVA is not available") says it itself."""
    text = comparable(template)
    return len(terms(text)) <= _GENERIC_TERMS and not _NAMING_TOKEN.search(text)


# CPython's wording of a built-in failure, which names nothing ("integer division or modulo
# by zero", "list index out of range"), and torch's (ATen's) wording of a tensor without the
# shape, size or type an operation needs ("shape '[<n>, <n>]' is invalid for input of size
# <n>"): any code raises it, so where it was raised says what failed, also behind a wrapper's
# "Failed to start model server: "
_BUILTIN_TEXT = lazyre.compile(
    r"(?:^|: )(?:shape '\[[^\]]*\]' is invalid for input of size <n>"
    r"|The size of tensor a \(<n>\) must match the size of tensor b \(<n>\) at non-singleton dimension <n>"
    r"|The expanded size of the tensor \(<n>\) must match the existing size \(<n>\) at non-singleton dimension <n>"
    r"(?:\. Target sizes: \[[^\]]*\]\. Tensor sizes: \[[^\]]*\])?"
    r"|index <n> is out of bounds for dimension <n> with size <n>|mat1 and mat2 shapes cannot be multiplied \(\w+ and \w+\)"
    r"|Sizes of tensors must match except in dimension <n>\. Expected size <n> but got size <n> for tensor number <n> in the list"
    r"|expected scalar type \w+ but found \w+"
    r"|integer division or modulo by zero|(?:float |integer )?division by zero|(?:float )?modulo by zero"
    r"|(?:list|tuple|string|bytearray) index out of range|(?:list|tuple) assignment index out of range"
    r"|dictionary changed size during iteration|maximum recursion depth exceeded[\w ]*"
    r"|cannot unpack non-iterable \w+ object|not enough values to unpack \(expected <n>, got <n>\)"
    r"|too many values to unpack \(expected <n>\)|pop from (?:an )?empty (?:list|deque)"
    r"|'NoneType' object is not (?:subscriptable|iterable|callable)|'NoneType' object has no attribute '\w+'"
    r"|list\.remove\(x\): x not in list|math domain error)\.?$")


def _builtin_text(query: CrashFeatures, candidate: CrashFeatures) -> bool:
    """Both messages end in the same CPython (or ATen) built-in wording."""
    a, b = (_BUILTIN_TEXT.search(comparable(f.message_template)) for f in (query, candidate))
    return bool(a and b and a.group(0).lstrip(": ") == b.group(0).lstrip(": "))


def _kernel_pair(a: list[str], b: list[str]) -> list[tuple[str, str, str]]:
    """The compiled kernels both crashes failed in (kb.core.tracebacks.compiled_kernel),
    when they differ: one compiler message from two kernels is two crashes."""
    kernel_a, kernel_b = (next((f for f in reversed(frames) if f.startswith(_KERNEL)), None) for frames in (a, b))
    if kernel_a and kernel_b and kernel_a != kernel_b:
        return [("compiled kernel", kernel_a.removeprefix(_KERNEL), kernel_b.removeprefix(_KERNEL))]
    return []


def _minor(version: str | None) -> tuple[int, int] | None:
    match = re.match(r"v?(\d+)\.(\d+)", version or "")
    return (int(match.group(1)), int(match.group(2))) if match else None


# Kinds that name no type of error: a logger's ERROR line, Python's default warning
# category (torch warns "CUDA initialization: <the error it would raise>" as UserWarning),
# and a traceback cut before its exception line, its message taken from the record above.
_NAMES_NO_TYPE = frozenset({LOGGED_ERROR, "UserWarning", "Warning", ""})


def _unwrapped(features: CrashFeatures) -> CrashFeatures:
    """The features of the error a wrapper's message carries with its type, else as given
    (kb.core.comparable.carried_error)."""
    carried = carried_error(features.message_template)
    if carried is None:
        return features
    return replace(features, exception=carried[0], message_template=carried[1])


def score(query: CrashFeatures, candidate: CrashFeatures, weights: TermWeights = UNIFORM,
          mix: float = TERM_MIX) -> MatchScore:
    explanation: list[str] = []
    unwrapped_q, unwrapped_c = _unwrapped(query), _unwrapped(candidate)
    if unwrapped_q is not query or unwrapped_c is not candidate:
        explanation.append("a wrapper quotes a typed error: that error is compared")
        query, candidate = unwrapped_q, unwrapped_c
    exc = exception_similarity(query.exception, candidate.exception)
    msg = message_similarity(query.message_template, candidate.message_template, weights, mix)
    untyped = {canonical_exception(query.exception), canonical_exception(candidate.exception)} & _NAMES_NO_TYPE
    if untyped and exc < 100:
        exc = msg  # a logger's copy of an error names no type (not another type): its words decide
        explanation.append(f"one side ({untyped.pop() or 'a cut traceback'}) names no type: the message decides")
    elif exc == 100:
        explanation.append("exception type equal")
    else:
        explanation.append(f"exception type differs ({query.exception} vs {candidate.exception})")
    explanation.append(f"message {msg:.0f}/100")
    site_is_identity = query.exception in CRASH_SIGNALS or candidate.exception in CRASH_SIGNALS
    # a kernel's fault or limit names no kernel: like a signal's, where it surfaced tells crashes apart
    unnamed_fault = names_no_kernel(query.message_template) or names_no_kernel(candidate.message_template)
    frames = 0.0
    if VALUE_ONLY.match(query.message_template) and VALUE_ONLY.match(candidate.message_template):
        # KeyError: 'qwen2' and KeyError: 'llama' from one lookup: the value is this run's
        # data, not what was looked up; where it was raised says that
        if query.frames and candidate.frames:
            frames = raise_site_similarity(query.frames, candidate.frames)
            core = _VALUE_SITE["exception"] * exc + _VALUE_SITE["frames"] * frames
            explanation.append(f"a message that is only a value: the raise site decides ({frames:.0f}/100)")
        else:
            core = min(_WITHOUT_FRAMES["exception"] * exc + _WITHOUT_FRAMES["message"] * msg, KNOWN_THRESHOLD - 1)
            explanation.append("a message that is only a value, a raise site unknown: at most similar")
    elif query.frames and candidate.frames:
        frames = frame_similarity(query.frames, candidate.frames)
        if (site_is_identity and min(len(query.frames), len(candidate.frames)) >= _SITE_FRAMES
                and all(f.startswith(_NATIVE) for f in query.frames + candidate.frames)):
            # a native backtrace is cut where each excerpt ends: the frames nearest the
            # fault, where both stacks reach, are the crash site (a Python stack is whole)
            frames = max(frames, _innermost_shared(query.frames, candidate.frames))
        explanation.append(f"frames {frames:.0f}/100")
        parts = _CRASH_SITE if site_is_identity else _WITH_FRAMES
        core = parts["exception"] * exc + parts["message"] * msg + parts["frames"] * frames
        generic = _generic(query.message_template) or _builtin_text(query, candidate)
        # a kernel's fault reported at the next sync names no kernel: the frames are where it
        # surfaced, and two that surfaced in other code are not known to be one crash
        if unnamed_fault and frames < _FRAMES_APART and not site_is_identity:
            core = min(core, KNOWN_THRESHOLD - 1)
            explanation.append("a kernel's fault or limit that surfaced in other code: at most similar")
        elif not site_is_identity and not generic:
            # frames only ever help: engines move code between versions
            core = max(core, _WITHOUT_FRAMES["exception"] * exc + _WITHOUT_FRAMES["message"] * msg)
        if generic and frames < _FRAMES_APART:
            # "<n> is not divisible by <n>" says nothing of what was being divided: raised
            # by other code (attention heads in a model vs experts in DeepSpeed), it is
            # another crash however equal the words
            core = min(core, KNOWN_THRESHOLD - 1)
            explanation.append("a message this generic raised from other code: at most similar")
    else:
        core = _WITHOUT_FRAMES["exception"] * exc + _WITHOUT_FRAMES["message"] * msg
        if site_is_identity:  # one crash site unknown: never the same crash for sure
            core = min(core, KNOWN_THRESHOLD - 1)
            explanation.append("a crash signal without its crash site on one side: at most similar")
        elif _builtin_text(query, candidate):
            core = min(core, KNOWN_THRESHOLD - 1)
            explanation.append("a built-in's words (CPython's, torch's), where raised unknown on one side: at most similar")
        elif unnamed_fault:
            # a kernel's fault reported at the next sync, or its limit, names no kernel: like
            # a signal, where it surfaced is what tells two such crashes apart
            core = min(core, KNOWN_THRESHOLD - 1)
            explanation.append("a kernel's fault or limit, where it surfaced unknown on one side: at most similar")
    if _surfaced(query.exception, candidate.exception) and query.frames and candidate.frames and frames < _FRAMES_APART:
        # one text as a native kind and as a Python type, raised from other code (ggml's
        # "CUDA error: no kernel image" and torch's RuntimeError): two engines' crashes
        core = min(core, KNOWN_THRESHOLD - 1)
        explanation.append("a native error and a Python one raised from other code: at most similar")
    if exc == 0 and msg < 90:
        core *= 0.7  # different type and a different text: a different crash
    phase_q, phase_c = _known_phase(query.phase), _known_phase(candidate.phase)
    # One call stack where it ran out is one phase, whether or not the log names it
    # (one frame is only where it ran out, the allocator every phase calls: when one log
    # names its phase and the other does not, that site cannot say the other's was the same)
    same_stack = frames >= _SAME_STACK and not (phase_q and phase_c and phase_q != phase_c) and (
        min(len(query.frames), len(candidate.frames)) >= _SITE_FRAMES or not (phase_q or phase_c))
    if (phase_decides(query) or phase_decides(candidate)) and not (phase_q and phase_q == phase_c) and not same_stack:
        # Running out of memory says what ran out, not why: loading weights, profiling,
        # capturing graphs and a training step run out for different reasons with
        # different fixes, so the phase is part of what the crash is (as the crash site
        # is for a signal): another phase, or one not known, is at most similar.
        core = min(core, KNOWN_THRESHOLD - 1)
        explanation.append(f"out of memory, phases {phase_q or 'unknown'} and {phase_c or 'unknown'}: at most similar")
    for slot, a, b in [*_code_pairs(query.message_template, candidate.message_template),
                       *_kernel_pair(query.frames, candidate.frames)]:
        core = min(core, KNOWN_THRESHOLD - 1)
        explanation.append(f"{slot} differs ({a} vs {b}): at most similar")

    factor = 1.0
    if query.engine and candidate.engine and query.engine != candidate.engine and compatible(query.engine, candidate.engine):
        # one a layer of the other (DeepSpeed on torch, vLLM on Ray): no other engine
        explanation.append(f"engine {query.engine} runs with {candidate.engine}")
    else:
        factor -= _penalty(query.engine, candidate.engine, _ENGINE_DIFFERS, "engine", explanation)
    factor -= _penalty(_known_phase(query.phase), _known_phase(candidate.phase), _PHASE_DIFFERS, "phase", explanation)
    factor -= _penalty(query.model_arch, candidate.model_arch, _ARCH_DIFFERS, "model architecture", explanation)
    factor -= _penalty(gpu_family(query.gpu_name), gpu_family(candidate.gpu_name), _GPU_FAMILY_DIFFERS, "GPU family", explanation)
    topology_q = _topology(query)
    topology_c = _topology(candidate)
    factor -= _penalty(topology_q, topology_c, _TOPOLOGY_DIFFERS, "topology", explanation)
    version_q, version_c = _minor(query.engine_version), _minor(candidate.engine_version)
    if version_q and version_c and query.engine == candidate.engine:
        distance = abs((version_q[0] - version_c[0]) * 100 + version_q[1] - version_c[1])
        cost = min(_VERSION_CAP, distance * _VERSION_STEP)
        factor -= cost
        explanation.append(f"engine version {query.engine_version} vs {candidate.engine_version}"
                           + (" (same minor)" if distance == 0 else f" ({distance} minor apart)"))
    total = round(max(0.0, core * factor), 1)
    status = tier(total, other_engine=engines_differ(query, candidate))
    if status == "similar" and total >= KNOWN_THRESHOLD:
        explanation.append("another engine: shown as similar, never known automatically")
    return MatchScore(score=total, status=status, explanation=explanation)


_OUT_OF_MEMORY = lazyre.compile(r"\bout of memory\b|\bOutOfMemory|\bOOM\b", re.I)


def phase_decides(features: CrashFeatures) -> bool:
    """Whether the phase is part of what the crash is: memory running out (torch's
    OutOfMemoryError, a CUDA or native allocator's "out of memory", an OOM kill)."""
    return bool(_OUT_OF_MEMORY.search(features.exception) or _OUT_OF_MEMORY.search(features.message_template[:120]))


def tier(value: float, *, other_engine: bool = False) -> str:
    """known | similar | new for a score. Another engine's incident is at best similar."""
    if value >= KNOWN_THRESHOLD and not other_engine:
        return "known"
    return "similar" if value >= SIMILAR_THRESHOLD else "new"


def engines_differ(a: CrashFeatures, b: CrashFeatures) -> bool:
    """Both crashes name their engine and the engines differ, neither running on the
    other (kb.core.engines.compatible): the gate on "known"."""
    return not compatible(a.engine, b.engine)


def _penalty(a: object, b: object, cost: float, label: str, explanation: list[str]) -> float:
    if a is None or b is None:
        return 0.0
    if a == b:
        explanation.append(f"same {label} ({a})")
        return 0.0
    explanation.append(f"{label} differs ({a} vs {b})")
    return cost


_SAME_STACK = 95.0  # frame similarity at which two stacks are the same code path
_SITE_FRAMES = 2  # a crash site compared by its innermost frames needs this many (one is the handler's)
_NATIVE = "<native>:"  # how a native frame is keyed (kb.core.fingerprint.frame_key)
_KERNEL = f"{KERNEL_FILE}:"  # ... and a compiled kernel (kb.core.tracebacks.compiled_kernel)


def _known_phase(phase: str | None) -> str | None:
    return None if phase in (None, "unknown") else phase


def _topology(features: CrashFeatures) -> str | None:
    if features.tp is None and features.dp is None and features.pp is None:
        return None
    return f"tp{features.tp or 1}/dp{features.dp or 1}/pp{features.pp or 1}"
