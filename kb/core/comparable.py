"""The part of a message template that identifies the error: what matching compares
and what recall keys are made of (the hash keeps the template as it is)."""

from __future__ import annotations

import re

from kb.core import lazyre
from kb.core.patterns import STATUS_CODES

# A leading tag that says where the error happened, not what it is: `[Rank <n>] `,
# `[PG <n> Rank <n>] ` and torch 2.5's `[PG ID <n> PG GUID <n>(default_pg) Rank <n>] ` name
# one locator three ways. A tag holding a placeholder is a locator; `[TM][ERROR]` is not.
# TensorRT's record puts its error code before its site (`2: [virtualMemoryBuffer.cpp::
# resizePhysical::140] Error Code 2: ...`) in some releases: the code is said again after.
_LOCATOR_TAG = lazyre.compile(r"^(?:<n>: (?=\[))?(?:\[[^\[\]]*<[a-z]+>[^\[\]]*\]:?\s*)+")
# A sentence repeated with other values (torch's OOM lists "Process <n> has <size> memory
# in use." once per process on the GPU): how many times is the run's detail, not the error.
_REPEATED_SENTENCE = lazyre.compile(r"((?:^|(?<=[.;!?]\s))[^.;!?]{8,}[.;!?](?:\s|$))(?:\1)+")


# A printed record of the run's state: `WorkNCCL(SeqNum=<n>, OpType=ALLREDUCE, NumelIn=<n>,
# Timeout(ms)=<n>)`. Its type names what was running; its fields (which releases add and
# drop, and which collective of which size stalled) are this run's, not the error's.
# (Fields are comma-separated, so a field ends at its comma: one way to read a record, in
# linear time even when the template's length cap cut it before its closing parenthesis.)
_FIELD = r"\s*[\w()]+=(?:[^,()]|\([^()]*\))*"
_RECORD_FIELDS = lazyre.compile(rf"\b([A-Z]\w*)\({_FIELD}(?:,{_FIELD})*(?:,\s*[\w()]*)?\s*(?:\)|$)")
# An aside that reports the values behind the error: "the derived max_model_len
# (max_position_embeddings=<n> or model_max_length=None in model's config.json)" names
# which config key held the number; the statement around it is the error.
_VALUE_ASIDE = lazyre.compile(r" \((?=[^()]*\b\w+=<[a-z]+>)[^()]*\)")


# A clause that says another error stopped something, before quoting it: "Process group
# watchdog thread terminated with exception: <the error>". The quoted error is the crash.
_WRAPPING_CLAUSE = lazyre.compile(r"^[^:]{0,80}?\b(?:with|raised an?|threw an?) (?:exception|error)s?:\s+(?=\S)")


# The script argparse names before its error ("train.py: error: unrecognized arguments:
# ..."): whose command line was refused is the run's, what was refused is the error. (A
# named program, "vllm: error: ...", says which tool's flags those are: it is kept.)
_SCRIPT_PROG = lazyre.compile(r"^[\w.-]+\.py: (?=error: )")
# A command-line flag is one flag however its words are joined: argparse and the engines
# accept --local-rank and --local_rank, --tensor-parallel-size and --tensor_parallel_size.
_FLAG = lazyre.compile(r"(?<![\w-])--[A-Za-z][\w-]*")


def _flag_spelling(match: re.Match[str]) -> str:
    return match[0].replace("_", "-")


# NCCL's result, then what failed: "Call to CUDA function failed. Last error: Cuda failure
# 'invalid argument'". The result is one of a few (the exception's type names it); the last
# error is what a NCCL WARN line of the same failure says on its own.
_NCCL_LAST_ERROR = lazyre.compile(r"^.*?\bLast error: (?=\S)", re.S)


# torch's CUDA initialization failure quotes the CUDA error it got ("Unexpected error from
# cudaGetDeviceCount(). Did you run ...? Error 804: forward compatibility was attempted on
# non supported HW"): the error is what every other report of it says, "CUDA error: ...".
_CUDA_INIT_ERROR = lazyre.compile(r"^Unexpected error from cudaGetDeviceCount\(\)\..*?\bError <n>: (?=\S)", re.S)
# torch's out-of-memory text: what ran out and how much was asked for, then the
# allocator's report of this run's memory (its wording changes between releases)
_TORCH_OOM_REPORT = lazyre.compile(r"^((?:CUDA|HIP|XPU) out of memory\. Tried to allocate <size>)[.\s(].*$", re.S)
# ggml's older "CUDA error 222 at <file>:<line>: <text>": its code restates the text, the
# site is where the check was (later releases print "CUDA error: <text>", the site below)
_CUDA_ERROR_AT = lazyre.compile(r"^(CUDA|HIP) error <n> at \S+:<n>: (?=\S)")


# The dynamic loader's "version `GLIBCXX_3.4.30' not found (required by <path>/x.so)": the
# library that is too old is the error, whichever extension needed the symbol version.
_REQUIRED_BY = lazyre.compile(r" \(required by [^()]*\)")


# A detail in parentheses that says there is none (TensorRT's "(no further information)").
_NO_DETAIL = lazyre.compile(r"\s*\((?:no further information|no details?|no information)\)\.?$", re.I)


def comparable(template: str) -> str:
    """The part of a message template that identifies the error, for comparing two of them
    (the hash keeps the template as it is): without leading locator tags, with a printed
    record's fields and asides that report values left out (or say there is no detail, or
    which library needed a missing symbol version), with a sentence repeated for each process or rank kept once, without a clause
    that only says the error stopped something or the script whose flags were refused,
    with each flag spelled one way, of NCCL's result and last error the last error, and of
    torch's CUDA initialization failure and ggml's coded CUDA error the CUDA error, and of
    torch's out-of-memory text what ran out, without its report of the run's memory."""
    view = _LOCATOR_TAG.sub("", _WRAPPING_CLAUSE.sub("", _LOCATOR_TAG.sub("", _NCCL_LAST_ERROR.sub("", template))))
    view = _CUDA_ERROR_AT.sub(r"\1 error: ", _CUDA_INIT_ERROR.sub("CUDA error: ", view))
    view = _TORCH_OOM_REPORT.sub(r"\1.", view)
    view = _FLAG.sub(_flag_spelling, _SCRIPT_PROG.sub("", view))
    view = _VALUE_ASIDE.sub(" (...)", _RECORD_FIELDS.sub(r"\1(...)", _NO_DETAIL.sub("", _REQUIRED_BY.sub("", view))))
    return _REPEATED_SENTENCE.sub(r"\1", view).strip() or template


# A wrapper that quotes the error it caught, type and all: "Capture cuda graph failed:
# RuntimeError: <text>", torch.compile's InternalTorchDynamoError whose text is
# "RuntimeError: <text>". The quoted error is the crash, whichever wrapper carried it: the
# matcher compares it, and the analyzer reports it where the wrapper's clause says it failed.
CARRIED_ERROR = lazyre.compile(r"^(?:(?P<lead>[^:'\"\n]{1,80}?): )?(?P<exc>(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception)|"
                           + STATUS_CODES + r"): (?P<msg>\S.*)", re.S)


def carried_error(template: str) -> tuple[str, str] | None:
    """(type, text) of the typed error a message template carries at its head, after at
    most a short clause of the wrapper's own; None when it carries none."""
    carried = CARRIED_ERROR.match(template)
    return (carried["exc"], carried["msg"]) if carried else None
