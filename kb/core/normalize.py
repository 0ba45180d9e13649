"""Normalization: what must not split two crashes with the same cause (paths, numbers,
sizes, addresses, pids, ranks, GPU indices, timestamps), as an ordered table of named
rules with samples, like Sentry's parameterization. Also frame paths made
library-relative and the frames that say nothing about the cause."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

from kb.core import lazyre
from kb.core.lazyre import LazyPattern, lazy
from kb.core.records import Frame


@dataclass(frozen=True)
class Normalizer:
    name: str
    pattern: LazyPattern
    replacement: str | Callable[[re.Match[str]], str]
    sample: str
    why: str


_CODE_FILE = lazyre.compile(r"[/\\]([\w+-]+?)(?:\.cpython-\d+\w*-[\w-]+|\.abi3)?(\.(?:so(?:\.\d+)*|pyd|dll|py|pyx|cpp|cc|cu|cuh|c|h|hpp|rs|go))[/\\]?$")


_SONAME_VERSION = lazyre.compile(r"(?:[.]\d+)+$")


def _code_file_kept(match: re.Match[str]) -> str:
    """'<path>/flash_attn_2_cuda.so' for a compiled extension or source file; '<path>'
    for anything else (model directories, data files: they vary between users)."""
    code = _CODE_FILE.search(match.group(0))
    if code is None:
        return "<path>"
    suffix = _SONAME_VERSION.sub("", code.group(2))
    return f"<path>/{code.group(1)}{suffix}"


MESSAGE_NORMALIZERS: tuple[Normalizer, ...] = (
    Normalizer("kernel-signature",
               lazy(r"\b(?:void|int|bool|auto) ([A-Za-z_]\w*(?:::\w+)*)\((?:[^()]|\([^()]*\))*\)(?: \[with [^\]]*(?:\]|$))?"),
               r"\1",
               "void indexSelectLargeIndex(TensorInfo<T, IndexType>, long) [with T = float, IndexType = unsigned int]: block: [0,0,0]",
               "a device-side assert names its kernel with the full signature or by name alone, "
               "as the build decides; the name says which kernel failed"),
    Normalizer("collective-fingerprint",
               lazy(r"CollectiveFingerPrint\((?:[^()]|\((?:[^()]|\([^()]*\))*\))*?OpType=([A-Z_]+)"
                    r"(?:[^()]|\((?:[^()]|\([^()]*\))*(?:\)|$))*(?:\)|$)"),
               r"CollectiveFingerPrint(OpType=\1)",
               "CollectiveFingerPrint(SequenceNumber=485, OpType=BROADCAST, TensorShape=[1], TensorDtypes=Long, "
               "TensorDeviceTypes=TensorOptions(dtype=float (default), device=cuda, memory_format=(nullopt)))",
               "torch's record of the collective a rank runs: its op is what ranks disagree on; sequence "
               "number, shapes and tensor options are this run's (and push the other rank's op past the "
               "template's length)"),
    Normalizer("long-list", lazy(r"\[(?:'[^']*'(?:, )?){6,}[^\]]*\]?|\[[^\]]{160,}\]?"), "[<list>]",
               "Supported architectures: ['AquilaModel', 'AquilaForCausalLM', 'BloomForCausalLM', 'GPT2LMHeadModel', 'LlamaForCausalLM', 'Qwen2ForCausalLM']",
               "lists of supported things change with every release"),
    Normalizer("url", lazy(r"https?://\S+"), "<url>", "See https://docs.vllm.ai/en/latest/x for more", "doc links move"),
    Normalizer("path", lazy(r"(?:[A-Za-z]:|~|\$\w+)?(?:/[\w.@+$~-]+){2,}/?"
                            r"|(?<![\w.$~/<>-])[\w.-]+(?:/[\w.@+$~-]+)*/[\w@+$~-]+\.[A-Za-z]\w{0,5}\b"
                            r"|[A-Za-z]:(?:\\[\w.@+-]+){2,}\\?"),
               _code_file_kept,
               "/usr/local/lib/python3.10/dist-packages/flash_attn_2_cuda.cpython-310-x86_64-linux-gnu.so",
               "install locations differ (Windows' too: 'C:\\Users\\me\\...\\llama_cpp\\lib\\ggml.dll'), and so "
               "does how a reporter hides their home ('~/', '/home/$USER/') or how far from the root a "
               "path is printed ('backends/src/lib.rs'); a code file's name (a compiled extension, a "
               "source file) says which library failed, so it stays, without its Python ABI tag"),
    Normalizer("library-version", lazy(r"\b([A-Za-z_][\w+-]*?)(?:\d+(?:\.\d+)+)?(\.so)(?:\.\d+)*\b"), r"\1\2",
               "libpython3.10.so.1.0: cannot open shared object file",
               "the library's soname version varies with the install, and so does a version its name "
               "holds (libpython3.10); its name identifies the cause"),
    Normalizer("dotted-name", lazy(r"(?<!module named ')(?<!from ')(?<!module ')(?<!import )"
                                   r"(?<![\w.])(?:[a-z_]\w*(?:\.\w+){2,}\b|[a-z_]\w*\.(?:weight|bias)\b)"), "<name>",
               "weight model.layers.0.self_attn.q_proj.weight does not exist",
               "parameter and module names depend on the model, not on the cause (a top-level "
               "parameter too: `lm_head.weight`); a module an import names is what is missing, so "
               "it stays ('No module named 'tensorrt_llm.models.llama.weight'')"),
    Normalizer("uuid", lazy(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", re.I), "<uuid>",
               "request 123e4567-e89b-12d3-a456-426614174000", "ids are per run"),
    Normalizer("hex", lazy(r"\b0x[0-9a-fA-F]+\b|\b[0-9a-f]{24,}\b"), "<hex>", "at 0x7f3789a61310", "addresses are per run"),
    Normalizer("ip", lazy(r"\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?\b"), "<ip>", "ip=29.125.226.69", "hosts differ"),
    Normalizer("timestamp", lazy(r"\b\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?Z?|\b\d\d:\d\d:\d\d(?:\.\d+)?\b"), "<time>",
               "2025-04-15 13:37:25,916", "time of the crash"),
    Normalizer("mangled-symbol", lazy(r"\b_Z[A-Za-z0-9_]{4,}"), lambda match: _symbol_namespace(match.group(0)),
               "undefined symbol: _ZN3c104cuda20CUDACachingAllocator9allocatorE",
               "which symbol an extension misses depends on the versions built against, not on the cause; "
               "the namespace it lives in says which library's ABI did not match (at::, c10:: torch, nvinfer1:: "
               "TensorRT, std:: the C++ runtime), and stays"),
    Normalizer("version", lazy(r"(?<![\w.])v?\d+(?:\.\d+){2,}(?:[.+-]?(?:post|rc|dev|a|b)\d*)?(?![\w.])"), "<version>",
               "NCCL version 2.21.5", "the same error recurs across releases"),
    Normalizer("size", lazy(r"\b\d+(?:\.\d+)?\s?(?:[KMGT]i?B|bytes|[KMGT]B)\b|\b\d+(?:\.\d+)?[KMGT](?=[\s,.;)]|$)"), "<size>",
               "Tried to allocate 1.74 GiB",
               "memory sizes depend on the model and the GPU (XLA prints them with the unit's letter "
               "alone: 'reserve 6.14G', '137.37M free')"),
    Normalizer("duration", lazy(r"\b\d+(?:\.\d+)?\s?(?:ms|milliseconds?|s|secs?|seconds?|mins?|minutes?|h|hours?)\b"),
               "<duration>", "The client socket has timed out after 60000ms while trying to connect",
               "a timeout is configured per run and printed in whichever unit the release chose "
               "('after 60s', 'after 60000ms', 'ran for 1800041 milliseconds')"),
    Normalizer("device", lazy(r"\b(cuda|GPU|gpu|device|rank|Rank|TP|DP|EP|PP|local_rank)([ :=]?)\d+\b"), r"\1\2<n>",
               "GPU 7 has a total capacity", "which GPU or rank failed is not the cause"),
    Normalizer("first-collective", lazy(r"\bSeqNum=1\b"), "SeqNum=<first>",
               "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE)",
               "a timeout of a communicator's first collective says it never worked (network, P2P, "
               "topology); of a later one, that the ranks fell out of step: kept apart from other numbers"),
    Normalizer("number", lazy(r"(?<![\w.-])(?<!HTTP Error )(?<!status code )(?<!status code: )"
                              r"(?<!rror code )(?<!rror code:)(?<!rror code: )(?<!rror code=)"
                              r"(?<!result = )(?<!result=)(?<!returns: )(?<!status=)(?<!status: )[-+]?\d+(?:\.\d+)?(?:e[-+]?\d+)?"
                              r"(?![\w])(?! (?:Client|Server) Error)"), "<n>", "(got `num_heads`: 71 and `num_shards`: 2",
               "counts, pids, lengths and line numbers vary between runs (names such as EAGLE-3 keep theirs); "
               "an HTTP status ('401 Client Error', 'status code 404') says what the server refused, and a "
               "runtime's error code ('ACL stream synchronize failed, error code:507035', 'runtime result = "
               "507018', 'CUresult error result=1', 'Native API returns: 20', 'status=4') what failed: they stay"),
    Normalizer("whitespace", lazy(r"\s+"), " ", "a\n  b", "line wrapping differs"),
)

MAX_TEMPLATE = 240


# An Itanium-mangled name nested in a namespace: _ZN / _ZNK (const) / _ZTVN (vtable), then
# the first component's length and name, or St for std::
_NESTED_SYMBOL = lazyre.compile(r"_Z(?:T[VIS])?N[rVKRO]*(St|\d+)")


def _symbol_namespace(symbol: str) -> str:
    """`_ZN3c104cuda9SetDeviceEi` -> 'torch::<symbol>': the outermost namespace of a mangled
    name (torch's at::, c10:: as torch), the symbol itself replaced; '<symbol>' when it is
    not nested or cut short."""
    head = _NESTED_SYMBOL.match(symbol)
    if head is None:
        return "<symbol>"
    if head.group(1) == "St":
        return "std::<symbol>"
    length = int(head.group(1))
    name = symbol[head.end():head.end() + length]
    if len(name) != length or not name.isidentifier():
        return "<symbol>"
    return f"{_NAMESPACE_LIBRARY.get(name, name)}::<symbol>"


# namespaces of one library's ABI: a symbol of any of them missing is that library mismatched
_NAMESPACE_LIBRARY = {"at": "torch", "c10": "torch", "caffe2": "torch", "c10d": "torch"}


@lru_cache(maxsize=4096)  # every rank prints the same error: grouping asks again and again
def message_template(message: str) -> str:
    """`message` with the per-run parts replaced, cut to a length that survives the
    truncation that log viewers and bug reports apply."""
    text = message.strip()
    for rule in MESSAGE_NORMALIZERS:
        text = rule.pattern.sub(rule.replacement, text)
    return text.strip()[:MAX_TEMPLATE]


# -- frames -----------------------------------------------------------------------------
_PACKAGE_ROOT = lazy(r"(?:site|dist)-packages/")
_KNOWN_PACKAGES = ("vllm", "sglang", "torch", "text_generation_server", "tensorrt_llm", "transformers",
                   "ray", "triton", "flash_attn", "xformers", "deepspeed", "accelerate", "megatron",
                   "xinference", "llama_index", "specforge", "trl", "peft", "llamafactory", "verl")
_KNOWN_ROOT = lazy(r"/(?:python/)?(" + "|".join(_KNOWN_PACKAGES) + r")/")
_STDLIB = lazy(r"/lib(?:64)?/python3\.\d+/")


def library_path(path: str) -> str:
    """'/root/env/lib/python3.12/site-packages/vllm/v1/worker/gpu_worker.py' -> 'vllm/v1/worker/gpu_worker.py'."""
    path = path.replace("\\", "/")
    if path.startswith(("...", "\u2026")):  # a path the reporter elided: ".../vllm/attention/layer.py"
        path = "/" + path.lstrip(".\u2026").lstrip("/")
    if not path.startswith("/") and not re.match(r"^[A-Za-z]:/", path):
        if not (_PACKAGE_ROOT.search(path) or _STDLIB.search("/" + path)):
            return path  # already relative (or "<frozen ...>", "<stdin>")
        path = "/" + path  # an install's path the reporter cut the home off: "anaconda3/envs/x/lib/..."
    match = None
    for match in _PACKAGE_ROOT.finditer(path):
        pass
    if match is not None:
        return path[match.end():]
    found = None
    for found in _KNOWN_ROOT.finditer(path):
        pass
    if found is not None:
        return path[found.start(1):]
    stdlib = _STDLIB.search(path)
    if stdlib:
        return path[stdlib.end():]
    parts = [p for p in path.split("/") if p]
    return "/".join(parts[-2:]) if parts else path


@dataclass(frozen=True)
class FrameRule:
    name: str
    pattern: LazyPattern  # matched against "library/path.py:function"
    sample: str
    why: str


# Frames that say nothing about the cause: wrappers, dispatch, process bootstrap.
IRRELEVANT_FRAMES: tuple[FrameRule, ...] = (
    FrameRule("torch-module-call", lazy(r"^torch/nn/modules/module\.py:(?:_call_impl|_wrapped_call_impl)$"),
              "torch/nn/modules/module.py:_call_impl", "nn.Module dispatch"),
    FrameRule("contextlib", lazy(r"(?:^|/)contextlib\.py:|torch/utils/_contextlib\.py:"),
              "torch/utils/_contextlib.py:decorate_context", "decorators"),
    FrameRule("stdlib-plumbing", lazy(r"^(?:multiprocessing|threading|concurrent/futures|asyncio|runpy|functools|selectors|subprocess)[/.]"),
              "multiprocessing/process.py:_bootstrap", "process and thread bootstrap"),
    FrameRule("uvloop", lazy(r"uvloop"), "uvloop/loop.pyx:uvloop.loop.Loop.run_until_complete", "event loop"),
    FrameRule("frozen", lazy(r"^<frozen |<string>|<stdin>"), "<frozen importlib._bootstrap>:_call_with_frames_removed", "import machinery"),
    FrameRule("tracing-wrapper", lazy(r"tracing/otel\.py:|:(?:sync_wrapper|async_wrapper|wrapper|inner|wrapped|_wrapper)$"),
              "vllm/tracing/otel.py:sync_wrapper", "instrumentation and generic wrappers"),
    FrameRule("elastic-wrapper", lazy(r"torch/distributed/elastic/multiprocessing/errors/__init__\.py:"),
              "torch/distributed/elastic/multiprocessing/errors/__init__.py:wrapper", "torchrun's error recorder"),
    FrameRule("native-plumbing", lazy(r"^<native>:(?:\(unknown\)|_?Py\w+|__libc_start\w*|_start|start_thread|clone3?|__restore_rt)$"),
              "<native>:(unknown)", "unsymbolized, interpreter and libc frames of a native stack"),
    FrameRule("signal-handler", lazy(r"^<native>:.*(?:[Ss]ignal_?[Hh]andler|FailureSignalHandler)\w*$"),
              "<native>:triton::server::(anonymous namespace)::ErrorSignalHandler",
              "the crash handler that printed the stack, not where the crash was"),
    FrameRule("cli-entry", lazy(r"(?:^|/)(?:bin/[\w.-]+|scripts\.py|cli/main\.py|click/core\.py|typer/(?:main|core)\.py):"),
              "bin/vllm:<module>", "command-line entry points"),
)


def frame_key(frame: Frame) -> str:
    return f"{library_path(frame.file)}:{frame.function}"


def relevant(key: str) -> FrameRule | None:
    """The rule that makes this frame irrelevant, or None when it counts."""
    for rule in IRRELEVANT_FRAMES:
        if rule.pattern.search(key):
            return rule
    return None
