"""What the analyzer knows about log formats, as ordered tables of small named entries.

Every entry has a name, a comment saying why it exists, and a sample line it must match
(tests/core/test_patterns.py checks each sample against its pattern). Order matters:
the first entry that matches wins. Ideas: Socorro's rule lists, PyTorch's log
classifier (priority-ordered regexes), NVIDIA's error-pattern roles.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from kb.core.lazyre import LazyPattern, lazy
from kb.core.redact import QUICK_LITERALS


@dataclass(frozen=True)
class Rule:
    name: str
    pattern: LazyPattern
    sample: str
    why: str
    # extra fields used by some tables
    exception: str | None = None  # label of the error this rule produces
    role: str | None = None  # root | symptom | cascade | confirmation | benign
    kind: str | None = None
    phase: str | None = None
    engine: str | None = None  # the engine that prints it
    anchors: tuple[str, ...] = field(default_factory=tuple)  # literals for the pre-filter
    # a line break may cut the text it reports (its group "cut" matched): the line below that
    # this pattern finds closes it (kb.core.tracebacks joins the lines up to it)
    closes: LazyPattern | None = None


def _r(pattern: str, flags: int = 0) -> LazyPattern:
    return lazy(pattern, flags)


_CONDITION_CLOSED = _r(r"[)'`] failed\b")  # an assertion's condition, then that it failed
_QUOTE_CLOSED = _r(r"'$")  # a quoted reason or rule, closed at the end of a line


# --------------------------------------------------------------------------------------
# Line prefixes, stripped layer by layer (a docker prefix, then a timestamp, then a
# process label, then a level header ...). Named groups: proc, level, ts, src.
# `header` entries are log-record headers: a new record starts on that line.
# --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Prefix:
    name: str
    pattern: LazyPattern
    sample: str
    why: str
    header: bool = False
    engine: str | None = None  # the engine whose logger prints this prefix
    starts: str = ""  # characters a line can start with for this prefix to apply ("" = any)
    # the record's message is laid out in a column: too long, it wraps onto the next lines,
    # which carry no prefix (rich's logging handler in a narrow terminal)
    wraps: bool = False


# absl's and gRPC's canonical status codes that name a failure, as "CODE: message" prints them
# (OK, CANCELLED and UNKNOWN say nothing of what failed)
STATUS_CODES = ("RESOURCE_EXHAUSTED|INVALID_ARGUMENT|FAILED_PRECONDITION|UNIMPLEMENTED|DEADLINE_EXCEEDED|OUT_OF_RANGE"
                "|DATA_LOSS|PERMISSION_DENIED|UNAUTHENTICATED|ALREADY_EXISTS|NOT_FOUND|UNAVAILABLE|INTERNAL|ABORTED")

_SOURCE_START = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789./_"

# the head of a "time | LEVEL | ..." record (loguru, FastChat)
_PIPE_TIME = r"^(?P<ts>\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?)\s*\|\s*"
_PIPE_LEVELS = r"TRACE|DEBUG|INFO|SUCCESS|WARNING|WARN|ERROR|CRITICAL"
_BRACKET_LEVELS = r"TRACE|DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL|[Tt]race|[Dd]ebug|[Ii]nfo|[Ww]arning|[Ww]arn|[Ee]rror|[Cc]ritical"

# the head of zerolog's console writer: a short (or RFC 3339) time and a three-letter level
_ZEROLOG_TIME = r"\d{1,2}:\d\d(?::\d\d)?(?:AM|PM)|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)"
_ZEROLOG_LEVELS = r"TRC|DBG|INF|WRN|ERR|FTL|PNC"

PREFIXES: tuple[Prefix, ...] = (
    Prefix("sglang", _r(r"^\[(?P<ts>(?:\d{4}-)?\d\d-\d\d \d\d:\d\d:\d\d)(?: (?P<proc>(?:(?:DP|TP|EP|PP|CP)\d+ ?)+))?\]\s?"),
           "[2025-06-13 09:59:00 TP3] Scheduler hit an exception: x",
           "SGLang: '[time TPn] ' with the rank labels of the scheduler process", header=True, engine="sglang", starts='['),
    Prefix("trtllm-logger", _r(r"^\[TRT-LLM\](?: \[(?P<proc>RANK \d+)\])? \[(?P<level>[EWIF])\]\s?"),
           "[TRT-LLM] [RANK 1] [E] Failed to initialize executor on rank 1: Executor creation failed due to insufficient GPU memory.",
           "TensorRT-LLM's Python logger, after its own [date-time]: the rank, then the severity's letter",
           header=True, engine="tensorrt-llm", starts='['),
    Prefix("vllm-process", _r(r"^\((?P<proc>[^()]{0,80}?pid=\d+[^()]{0,200}?)\)\s?"),
           "(VllmWorker TP3 pid=4242) ERROR 02-22 17:52:14 [multiproc_executor.py:783] x",
           "vLLM V1 and Ray prefix every line of a child process with its name and pid", starts='('),
    Prefix("vllm-level", _r(r"^(?P<level>DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)\s+(?P<ts>(?:\d{4}-)?\d\d-\d\d \d\d:\d\d:\d\d)(?:\.\d+)?\s+(?:\[(?P<src>[\w./-]+:\d+)\]|(?P<src2>[\w./-]+:\d+)\])\s?"),
           "ERROR 02-22 17:52:14 [core.py:1029] Traceback (most recent call last):",
           "vLLM's logger: level, month-day time and [file:line] (older versions lack the '[')",
           header=True, engine="vllm", starts='DIWEC'),
    Prefix("level-time-fields", _r(r"^(?P<level>DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)\s+(?P<ts>\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?)"
                                   r"\s+(?:[\w.-]+\s+){0,3}?(?P<src>[\w./-]+\.py:\d+)\s+-+\s"),
           "ERROR 2024-09-19 08:23:55,732 controller 528 deployment_state.py:681 - Exception in Replica(id='352yge88'), the replica will be stopped.",
           "a logger that puts the level before the time, then fields (component, pid) and file:line before ' - ' "
           "(Ray Serve's: '%(levelname)s %(asctime)s %(component)s %(process)d %(filename)s:%(lineno)d - ')",
           header=True, starts='DIWEC'),
    Prefix("torch-rank", _r(r"^\[(?P<proc>(?:default)?rank\d+)\]:\s?"), "[rank3]:   File \"train.py\", line 1, in <module>",
           "torchrun's --tee / log prefix for each local rank", starts='['),
    Prefix("zerolog-relay", _r(r"^(?:" + _ZEROLOG_TIME + r") (?:" + _ZEROLOG_LEVELS + r") (?P<src>[\w.-]+(?:\([^()]*\))?): (?:stdout|stderr) "),
           "9:11AM DBG GRPC(whisper/ggml-large-v3-q5_0.bin-127.0.0.1:36495): stderr ggml_cuda_init: failed to initialize CUDA",
           "a Go server that relays a child's output line by line through zerolog's console writer (LocalAI's "
           "backends): the level is the relay's, not the line's, so it is not kept; the child's own words decide",
           header=True, starts="0123456789"),
    Prefix("zerolog-console", _r(r"^(?P<ts>" + _ZEROLOG_TIME + r") (?P<level>" + _ZEROLOG_LEVELS + r") "),
           "3:04PM ERR failed to load model error=\"could not load model: rpc error: code = Unavailable\"",
           "zerolog's console writer (LocalAI and other Go servers): a short time, a three-letter level",
           header=True, starts="0123456789"),
    Prefix("go-log", _r(r"^(?P<ts>\d{4}/\d\d/\d\d \d\d:\d\d:\d\d)(?:\.\d+)? (?:(?P<src>[\w.-]+\.go:\d+): )?"),
           "2024/03/01 10:46:26 llama.go:451: signal: illegal instruction",
           "Go's standard logger (ollama and other Go servers): date, time, optional file:line", header=True,
           starts="0123456789"),
    Prefix("logfmt", _r(r"^time=\S+ level=(?P<level>[A-Z]+) source=(?P<src>\S+) msg="),
           'time=2024-06-01T10:00:00.000Z level=ERROR source=sched.go:443 msg="error loading llama server"',
           "Go's slog text handler (ollama >= 0.1.40): key=value fields, the message last", header=True, starts="t"),
    Prefix("glog-bracket", _r(r"^\[(?P<level>[IWEF])(?:(?P<ts>\d{3,4} \d\d:\d\d:\d\d\.\d+)(?: \d+)? | )[\w./\\:-]+\.\w+:\d+\]\s?"),
           "[W409 11:42:27.776885251 ProcessGroupNCCL.cpp:1250] Warning: x",
           "c10 messages printed by PyTorch's C++ side (older torch: '[E socket.cpp:500]', no time)",
           header=True, starts='['),
    Prefix("glog", _r(r"^(?P<level>[IWEF])(?:(?P<ts>(?:\d{4})?\d{4} \d\d:\d\d:\d\d\.\d+)\s+\d+\s+(?P<src>[\w./\\:-]+:\d+)\]\s?"
                      r"| (?P<src2>[\w./\\-]+\.\w+:\d+)(?:\] ?| {2,}))(?:\[\d+/\d+(?:_\d+)?\] )?"),
           "E0724 19:33:34.565000 128818126430656 torch/distributed/elastic/multiprocessing/api.py:702] failed",
           "glog's header, the year in front of the date since glog 0.7 ('E20260530 21:16:47.670934'), "
           "(torch.distributed.elastic; torch.compile's adds its compile id: '[0/0] '); "
           "C++ libraries' short form is the severity's letter and file:line alone ('E ucx_utils.cpp:585] ', NIXL)",
           header=True, starts='IWEF'),
    Prefix("llamacpp-log", _r(r"^(?P<ts>\d+\.\d\d\.\d{3}\.\d{3}) (?P<level>[DIWE]) (?:(?P<src>[a-z]{2,5}) +(?=\S))?"),
           "0.00.307.807 E llama_model_load: error loading model: unknown model architecture: 'spark2_5'",
           "llama.cpp's own log with its time stamps on (llama-server, llama-box): time since start, the "
           "level's letter, a component's short tag ('srv', 'cmn')",
           header=True, engine="llama.cpp", starts="0123456789"),
    Prefix("neuron", _r(r"^(?P<ts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+):\s+\d+\s+(?P<level>DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL)\s+\|\|(?P<src>[\w-]+)\|\|:\s*"),
           "2024-12-14 00:55:07.000624:  327  ERROR ||NEURON_CC_WRAPPER||: Compilation failed for /tmp/model.hlo_module.pb after 0 retries.",
           "AWS Neuron's libraries (neuronx-cc wrapper, compile cache): time, pid, level, ||COMPONENT||",
           header=True, starts='0123456789'),
    Prefix("oneccl", _r(r"^(?P<ts>\d{4}:\d\d:\d\d-\d\d:\d\d:\d\d):\(\s*\d+\)\s+\|CCL_(?P<level>ERROR|WARN|INFO|DEBUG|TRACE|FATAL)\|\s?"),
           "2025:03:13-10:36:27:(  636) |CCL_ERROR| ze_fd_manager.cpp:214 fill_device_fds: condition fds[dev_idx] > 0 failed",
           "Intel oneCCL (the collectives of vLLM and torch on XPUs): time, (pid), its level between bars",
           header=True, starts='0123456789'),
    Prefix("logcat", _r(r"^(?P<ts>(?:\d{4}-)?\d\d-\d\d \d\d:\d\d:\d\d\.\d{3})\s+(?:\d+-\d+\s+(?P<src>\S+)\s+[\w.:]+|\d+\s+\d+)"
                        r"\s+(?P<level>[VDIWEFA])\s+(?:(?P<src2>[^:\s]+)\s*: )?"),
           "2024-09-10 23:46:05.024 32001-32058 AndroidRuntime          ai.mlc.mlcchat                       E  FATAL EXCEPTION: Thread-8",
           "Android's logcat (an app running an engine on the phone, MLC): time, pid-tid, tag, package, a "
           "one-letter level (A: an assertion, fatal); the classic form puts pid, tid, level, then 'tag: '",
           header=True, starts='0123456789'),
    Prefix("py-logging", _r(r"^(?P<ts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+)\s+(?:(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL)\s+[\w.]+:\d+ -- |[\w.]+ \d+ (?P<level2>DEBUG|INFO|WARNING|ERROR|CRITICAL)\s+)"),
           "2025-04-15 13:37:25,916 ERROR worker.py:422 -- Unhandled error",
           "Ray and xinference use Python logging with a comma before milliseconds", header=True, starts='0123456789'),
    Prefix("deepspeed", _r(r"^\[(?P<ts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+)\] \[(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL)\] \[(?P<src>[\w.]+:\d+)(?::\w+)?\]\s?"),
           "[2023-04-14 13:11:27,885] [ERROR] [launch.py:434:sigkill_handler] ['/usr/bin/python3', '-u', 'main.py'] exits with return code = -9",
           "DeepSpeed's logger: bracketed time, level and file:line:function", header=True, engine="deepspeed", starts='['),
    Prefix("ray-cpp", _r(r"^\[(?P<ts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+) (?P<level>[IWECF]) \d+ \d+\] (?:\([\w.]+\) )?(?P<src>[\w./-]+:\d+):\s+"),
           "[2023-06-27 07:56:04,042 C 1257 1257] (raylet) local_task_manager.cc:431:  Check failed: x != Nil()",
           "Ray's C++ logger (raylet, gcs_server, core worker): time, level letter, pid, tid, component, file:line",
           header=True, starts='['),
    Prefix("torchrun-old", _r(r"^\[(?P<ts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+)\] [\w.]+: \[(?P<level>\w+)\]\s?"),
           "[2023-10-13 17:40:02,544] torch.distributed.elastic.multiprocessing.api: [ERROR] failed (exitcode: -9)",
           "torchrun before 2.2 logged with a bracketed timestamp", header=True, starts='['),
    Prefix("rust-tracing", _r(r"^(?P<ts>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z)\s+(?P<level>TRACE|DEBUG|INFO|WARN|ERROR)\s+(?:(?P<proc>shard-manager|download|webserver)[^:]*: )?(?:(?P<src>[\w:]+): (?:[\w./-]+\.rs:\d+: )?|(?=\w+\{))"),
           "2023-08-25T10:57:30.352453Z ERROR text_generation_launcher: Error when initializing model",
           "Rust tracing's header (TGI, TEI and other Rust servers; their target names the engine): time, "
           "level, target and, when the subscriber prints them, "
           "the file and line", header=True, starts='0123456789'),
    Prefix("trt-time", _r(r"^\[(?P<ts>\d\d/\d\d/\d{4}-\d\d:\d\d:\d\d)\]\s"),
           "[03/27/2024-11:09:02] [TRT] [E] 6: The engine plan file is generated on an incompatible device",
           "TensorRT's logger timestamp", header=True, starts='['),
    Prefix("py-logging-default", _r(r"^(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL):[\w.]+:"),
           "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: 1) local_rank: 0 (pid: 51)",
           "Python logging's default format (logging.basicConfig): LEVEL:logger:message", header=True,
           starts="DIWEC"),
    Prefix("rich-logging", _r(r"^(?:\[(?P<ts>\d\d/\d\d/\d\d \d\d:\d\d:\d\d)\]| {19}) (?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL) +"),
           "[05/05/25 16:31:14] DEBUG    Server check failed: [Errno 61] Connection refused, retrying...",
           "rich's logging handler: the time only when it changed, the level padded, the source right-aligned",
           header=True, starts="[ ", wraps=True),
    Prefix("table-row", _r(r"^\|(?=(?:[^|]*\|){2,}\s*$|(?:[^|]*\|){2,}[^|]+$)(?:[^|]*\|)*?(?=[^|]*\|\s*$|[^|]*$)\s*"),
           "| tensorrt_llm | 1       | UNAVAILABLE: Internal: unexpected error when creating modelInstanceState: |",
           "a row of an ASCII table (Triton's model status): the message is the last cell, and a message too long "
           "for it goes on in the next rows, their other cells blank; the closing '|' is cut in split.py "
           "(a row the excerpt cut has none)",
           starts="|"),
    Prefix("source-level", _r(r"^(?P<src>[\w.\\/-]*\.(?:c|cc|cpp|cxx|cu|cuh|h|hpp|rs|go|py)(?::\d+){1,2}): (?P<level>ERROR|FATAL|[Ee]rror|[Ff]atal error|WARNING|[Ww]arning):\s+"),
           "ggml-cuda.cu:3211: ERROR: CUDA kernel vec_dot_q5_K_q8_1_impl_vmmq has no device code compatible with CUDA arch 520.",
           "a source location, then the severity: C/C++ libraries' own error macros (ggml) and compilers "
           "(a JIT build's `x.cu:12:5: error: ...`)", header=True, starts=_SOURCE_START),
    Prefix("habana-logger", _r(r"^\[(?P<ts>\d\d:\d\d:\d\d\.\d+)\]\[(?P<src>\w+)\s*\]\[(?P<level>trace|debug|info|warning|error|critical)\]\[tid:\w+\]\s?"),
           "[19:08:34.164951][GC                    ][error][tid:44F8A] Failed to load tpc kernel for node: TPC634",
           "Intel Gaudi's (Habana) logger: time, component padded in brackets, lowercase level, thread id",
           header=True, starts="["),
    Prefix("bracket-level", _r(r"^\[(?P<level>DEBUG|INFO|WARN|WARNING|ERROR|CRITICAL|FATAL|EVENT)\]\s+(?:[A-Z][A-Z_]*\(\d+,[^)]*\):(?P<ts>[\d:.-]+)\s+\[(?P<src>[\w./-]+:\d+)\]\d*\s+)?"),
           "[ERROR] GE(173913,):2025-12-25-17:14:00.937.954 [tiling.cc:312]174006 BuildTilingParseOutputs: ErrorNo: 1343225857(Parameter invalid!) Failed",
           "a bracketed level first; Huawei CANN's log (vllm-ascend) goes on with module(pid,process):time [file:line]tid",
           header=True, starts="["),
    Prefix("stream-label", _r(r"^std(?:err|out): "),
           "stderr: gguf_init_from_file: invalid magic number 0a8a0280",
           "a wrapper that relays a child's output line by line names the stream it came from "
           "(Jan's and other desktop apps' model servers)",
           starts="s"),
    Prefix("level-word", _r(r"^(?:(?P<level>DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL)(?::\s+|\s+(?=\S))"
                            r"(?:(?P<src>[a-z_]\w*(?:::\w+)+): )?|(?P<level2>error|fatal|warning):\s+(?=\S))"),
           "ERROR dynamo_runtime::worker: Application shutdown with error: Failed to connect to etcd server",
           "loggers that print only the level before the message (after a capture timestamp, uvicorn); Rust's "
           "tracing puts its target, a module path, between them; command-line tools (uv, cargo, git, pip) "
           "state theirs in lower case with a colon (`error: unexpected argument '--x' found`)",
           header=True, starts="DIWECFefw"),
    Prefix("pipe-fields-redirect", _r(_PIPE_TIME + r"(?:" + _PIPE_LEVELS + r")\s*\|\s*(?P<src>stderr|stdout)\s*\|\s"),
           "2023-04-01 09:04:18 | ERROR | stderr | Loading checkpoint shards: 100%|##########| 2/2 [00:15<00:00,  7.61s/it]",
           "a logger that re-logs a redirected stream (FastChat's stderr, all at ERROR): that level is the "
           "stream's, not the message's, so it is not kept; the message's own level word decides",
           header=True, starts='0123456789'),
    Prefix("pipe-fields", _r(_PIPE_TIME + r"(?P<level>" + _PIPE_LEVELS + r")\s*\|\s*(?P<src>[^|\s][^|]{0,80}?)\s*(?:\| | - )"),
           "2024-05-01 10:00:05.456 | ERROR    | app.server:start:57 - Failed to load model: CUDA out of memory",
           "loguru's default and FastChat's logger: time | LEVEL | name or module:function:line, then the message",
           header=True, starts='0123456789'),
    Prefix("bracket-time-level", _r(r"^\[(?:(?P<ts>(?:\d{4}-)?\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?Z?)\s+(?P<level>" + _BRACKET_LEVELS + r")"
                                    r"|(?P<level2>" + _BRACKET_LEVELS + r")\s+(?:\d{4}-)?\d\d-\d\d[T ]\d\d:\d\d:\d\d)"
                                    r"(?=[\s\]])[^\[\]]{0,200}\]\s?"),
           "[09-25 19:03:45.989 ERROR  nim_sdk::hub::repo  rust/nim-sdk/src/hub/repo.rs:119] error sending request for url",
           "a logger whose head is one bracket that opens with a time and a level, in either order, then "
           "its own fields (target, file:line) to the bracket's close (NVIDIA NIM's Rust SDK, spdlog-style formats)",
           header=True, starts="["),
    # Any logger whose format is a run of bracketed fields: the run ends where the message
    # starts (behind an arrow, a dash, a colon or a bar), and the fields that are a time or
    # a level say so, in whatever order. One must be a time, so a bracketed list or an
    # error's own tags ("[TensorRT-LLM][ERROR] ...") are no head.
    Prefix("bracket-fields", _r(r"^(?=(?:\[[^\[\]]{1,60}\] ?){0,5}\[\d{4}-\d\d-\d\d[T ][\d:.,]+(?:Z|[+-]\d\d:?\d\d)?\])"
                                r"(?:\[(?:(?P<ts>\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?)"
                                r"|(?P<level>" + _BRACKET_LEVELS + r"|SUCCESS|[DIWEF])"
                                r"|[^\[\]\s][^\[\]]{0,59})\] ?){2,6}(?:(?:>{1,3}|-|:|\|) )?"),
           "[2024-04-17 20:07:13,727] [ERROR] [MainThread] [asyncio] >>> AssertionError",
           "a logger whose format is bracketed fields ('[%(asctime)s] [%(levelname)s] [%(threadName)s] "
           "[%(name)s] >>> %(message)s', Docker Model Runner's '[<RFC 3339>][component][W] ', spdlog's "
           "'[time] [logger] [error] '), in any order, one of them a time; a level may be its initial",
           header=True, starts="["),
    Prefix("iso", _r(r"^(?P<ts>\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?Z?)\s+(?:[-|>]{1,3}\s+)?"
                     r"(?:(?:(?:[-|]\s+)?(?:\d+|[\w.-]{1,60}|\[[^\[\]]{1,60}\])\s+){0,3}?(?:[-|]\s+)?"
                     r"(?P<level>DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL)(?!\s+(?:\d{4}-)?\d\d-\d\d[T ]\d)(?:\s*[-|:])?\s+"
                     r"(?:\[(?P<src>[^\[\]\s]{1,100})\]:?\s+)?)?"),
           "2024-07-01 07:28:04.488 1 kserve ERROR [__main__.py:<module>():254] Failed to start model server",
           "any other ISO-timestamped logger: the time, up to three fields (process id, logger, thread; "
           "'%(asctime)s - %(name)s - %(levelname)s - ' too), the level and a bracketed source; a "
           "collector's time before an engine's own record head ('<time>  >> ERROR 07-17 03:38:23 [core.py:398]') "
           "leaves that head to the engine's prefix",
           header=True, starts='0123456789'),
)


def by_first_char(entries):
    """(entries by the first character a line can start with, entries that start anywhere),
    in table order: a line tries the few that can match instead of all of them."""
    anywhere = tuple(e for e in entries if not e.starts)
    return {char: tuple(e for e in entries if not e.starts or char in e.starts)
            for char in {c for e in entries for c in e.starts}}, anywhere


_PREFIXES_BY_FIRST, _PREFIXES_ANYWHERE = by_first_char(PREFIXES)


def known_engine_prefix(text: str, specific: bool = False) -> bool:
    """Does an engine logger's record header start `text`? `specific`: one that says more
    than a bare level word."""
    return any(p.header and (not specific or p.name != "level-word") and p.pattern.match(text)
               for p in _PREFIXES_BY_FIRST.get(text[:1], _PREFIXES_ANYWHERE))


_PROCESS_LABELS = tuple(p for p in PREFIXES if p.name in ("vllm-process", "torch-rank"))


def starts_record(text: str, specific: bool = False) -> bool:
    """Does `text` begin a new log record: an engine header, maybe behind a process label?
    (A line cut by a terminal wrap goes on mid-record; a new record is not its rest.)
    `specific`: a bare level word ("ERROR ") is not enough."""
    for _ in range(3):
        if known_engine_prefix(text, specific):
            return True
        match = next((m for p in _PROCESS_LABELS if (m := p.pattern.match(text))), None)
        if match is None or match.end() == 0:
            return False
        text = text[match.end():]
    return False


# --------------------------------------------------------------------------------------
# Python traceback grammar
# --------------------------------------------------------------------------------------
TRACEBACK_START = _r(r"Traceback \(most recent call last\):\s*$")
# IPython's traceback header: the exception's type, padded to the console's width, then
# "Traceback (most recent call last)" without a colon; its last line is "Type: message"
IPYTHON_HEADER = _r(r"^(?P<exc>(?:[A-Za-z_]\w*\.)*[A-Z]\w*) {2,}Traceback \(most recent call last\)\s*$")
# ... and its frames: "File ~/envs/x/lib/python3.10/site-packages/m.py:214, in Class.method(self, x)"
IPYTHON_FRAME = _r(r"^\s*File \[?(?P<file>[^\s\[\](),]+?\.pyx?):(?P<line>\d+)\]?(?:\([^)]*\))?, in (?P<func>[\w.<>]+)")
# "  File "x.py", line 3, in f" (traceback) and "  File "x.py", line 3 in f" (faulthandler)
FRAME = _r(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+)(?:,? in (?P<func>.+?))?\s*$')
# faulthandler's frame: "  File "x.py", line 3 in f" (a traceback's has ", in f" and a code line)
DUMP_FRAME = _r(r'^\s*File "[^"]+", line \d+ in ')
FAULTHANDLER_STACK = _r(r"^(?:Current thread|Thread) 0x[0-9a-f]+ \(most recent call first\):$")
# abseil's failure signal handler's stack (Ray, gRPC): "PC: @ 0x7f.. (unknown) ncclProxyService()",
# then "@ 0x7f.. 3792 (unknown)" lines, most recent first
NATIVE_FRAME = _r(r"^(?:PC: )?@\s+0x[0-9a-fA-F]+\s+(?:\d+\s+)?(?P<func>\S.*?)\s*$")
# glibc's backtrace_symbols() line, as UCX's and many C/C++ signal handlers print their
# stack (numbered, most recent first): "6  /x/libuct.so.0(uct_tcp_ep_am_bcopy+0x8a) [0x7a84..]";
# an unsymbolized frame has no function ("libc.so.6(+0x42520)")
BACKTRACE_SYMBOL = _r(r"^(?:#?\d+\s+)?[^\s()]+\((?P<func>[A-Za-z_][^()+\s]*)?\+0x[0-9a-fA-F]+\)\s*\[0x[0-9a-fA-F]+\]\s*$")
# Cosmopolitan's crash report (llamafile, whisperfile), most recent first: the frame's
# address, the program counter, then the symbol and its offset in decimal:
# "7f3ad1ffe8a0 4a81c6 llama_server_context::update_slots()+1350"
ADDRESS_SYMBOL = _r(r"^[0-9a-f]{6,16} [0-9a-f]{1,16} (?P<func>[A-Za-z_~][^+]*?)\+\d+\s*$")
# boost::stacktrace's frame, as Triton's signal handler prints it, most recent first:
# " 5# grpc_core::chttp2::TransportFlowControl::PeriodicUpdate() in /opt/tritonserver/bin/tritonserver"
BOOST_FRAME = _r(r"^\s*\d+# (?!0x[0-9A-Fa-f]+ )(?P<func>[A-Za-z_~](?:[^(]|\(anonymous namespace\))*?)(?:\([^()]*\)|\([^()]*$)?(?: (?:at|in) \S+)?\s*$")
# A numbered frame with its address, as gdb ("#3  0x00007f.. in ncclProxyService () from
# /x/libnccl.so.2") and UCX's detailed backtrace ("14 0x0000000000004493 ???()  /x/libffi.so.8:0")
# print them, most recent first
NUMBERED_FRAME = _r(r"^#?\d+\s+0x[0-9a-fA-F]{6,16}\s+(?:in\s+)?(?P<func>[^\s(]+) ?\(")
# Android's crash dump frame (tombstone, logcat): "#00 pc 00000000001ace90  /data/app/.../lib.so
# (Java_com_x_Context_load+104) (BuildId: d2dc...)", most recent first; the function may be missing
ANDROID_FRAME = _r(r"^#\d{2,} pc [0-9a-fA-F]+\s+\S+(?:\s+\((?P<func>[^()+\s][^()+]*?)(?:\+\d+)?\))?")
CARET = _r(r"^\s*[\^~]+\s*$")
CHAIN_CAUSE = "The above exception was the direct cause of the following exception"
CHAIN_CONTEXT = "During handling of the above exception, another exception occurred"
# NCCL's results whose names do not end in Error (ncclResult_t): torch prints them like
# the others ("ncclInvalidUsage: This usually reflects invalid usage of NCCL library.")
NCCL_RESULTS_NOT_ERROR = r"nccl(?:InvalidArgument|InvalidUsage|InProgress)"
# An NCCL result's name, whole: torch's ncclSystemError line, the kind of its "Last error"
NCCL_RESULT = _r(rf"^(?:nccl[A-Z]\w*Error|{NCCL_RESULTS_NOT_ERROR})$")
# "ValueError: msg", "torch.OutOfMemoryError: msg", "ray.exceptions.RayTaskError(ValueError): msg",
# a JVM's nested class "org.apache.tvm.Base$TVMError: msg";
# TensorFlow re-raises a graph op's error as "UnknownError (see above for traceback): msg"
EXCEPTION_LINE = _r(r"^(?P<exc>(?:[A-Za-z_]\w*\.)*(?:[A-Z]\w*\$)?(?:[A-Z_]\w*|[a-z]+[A-Z]\w*(?:Error|Exception)|" + NCCL_RESULTS_NOT_ERROR
                    + r")(?:\([\w.]+\))?)"
                    r"(?: \(see above for traceback\))?(?::(?: (?P<msg>.*))?)?$")
# Outside a traceback a bare "Name: text" is only an exception when it is named like one.
EXCEPTION_NAME_OUTSIDE = _r(r"(?:Error|Exception|Interrupt|Exit|Failure|Fault)(?:\([\w.]+\))?$|^" + NCCL_RESULTS_NOT_ERROR + "$")
# An exception named anywhere in a line: "Name: message" or the repr form "Name('message')".
# The name ends like an exception class (a module path or a C++ namespace before it), or
# is a class of an `errors` / `exceptions` / `exc` module (triton.runtime.errors.OutOfResources,
# torch._dynamo.exc.Unsupported);
# C libraries' bindings name them lower camel case first (ncclXxxError, nixlBackendError).
# The class may be printed as itself, `<class 'RuntimeError'>: msg` (a handler that prints
# type(e) and then e, as TGI's server does).
EXCEPTION_MENTION = _r(
    r"(?<![\w.])(?<!::)(?P<cls><class ')?(?P<exc>(?:[A-Za-z_]\w*(?:\.|::))*(?:[A-Z]\w*\$)?(?:[A-Z]\w*|[a-z]+[A-Z]\w*)(?:Error|Exception|Interrupt|Failure|Fault|Warning)"
    r"|(?:[A-Za-z_]\w*\.)*(?:errors?|exceptions?|exc)\.[A-Z]\w*)(?(cls)'>)"
    r"(?::\s+(?P<msg>\S.*)|\((?P<q>['\"])(?P<repr>.*?)(?P=q)\))")
# rich's console handler puts the source at the end of the line: "...   local_server.py:108"
TRAILING_SOURCE = _r(r"(?<!\s)\s{3,}[\w.-]+\.py:\d+\s*$")
# rich's source column: one space apart when the message column is full ("Failed to local.py:302")
COLUMN_SOURCE = _r(r"\s+(?P<src>[\w.-]+\.py:\d+)\s*$")
# A message that is the repr of an exception raised by `raise X(...` on a truncated log.
RAISE_CALL = _r(r"^\s*raise (?P<exc>(?:[A-Za-z_]\w*\.)*[A-Z]\w*)\((?:f?[\"'](?P<msg>[^\"']*))?")

# How a shell reports a job that a signal ended: bash/dash in a script ("run.sh: line 3:  4242
# Killed   python x.py"), an interactive job ("[1]+  Killed   python x.py"), zsh in its own
# words ("zsh: abort   llm ...", "[1]    4242 floating point exception  lmdeploy ...", SIGABRT as
# "IOT instruction" on Linux), or the
# words alone (bash's; zsh's lowercase ones only behind a prefix). The message is the words
# (and "core dumped") and the command, without the job's locator.
ZSH_CRASH_WORDS = "illegal hardware instruction|segmentation fault|bus error|floating point exception"
ZSH_SIGNAL_WORDS = "killed|abort|IOT instruction"
_SHELL_JOB = (r"^(?!(?:{zsh})\b)(?:[^\n]*?: line \d+: +\d+ |\[\d+\][+-]? +(?:\d+ +)?|zsh: )?"
              r"(?P<msg>(?P<signame>{bash}|{zsh})(?:\s+\(core dumped\))?(?:\s+\S.*)?)$")

# --------------------------------------------------------------------------------------
# Error lines that are not Python exception lines. role decides what they mean.
# --------------------------------------------------------------------------------------
# NTSTATUS codes of the native exceptions a Windows process dies of
_WINDOWS_EXCEPTIONS = {"0xc0000005": "access violation", "0xc000001d": "illegal instruction",
                       "0xc0000409": "stack buffer overrun", "0xc00000fd": "stack overflow",
                       "0xc0000094": "integer divide by zero", "0xe06d7363": "C++ exception"}
# the signal the same fault raises on a POSIX system: the crash's identity is that signal's
_POSIX_SIGNAL = {"access violation": "SIGSEGV", "stack overflow": "SIGSEGV", "stack buffer overrun": "SIGABRT",
                 "integer divide by zero": "SIGFPE", "illegal instruction": "SIGILL"}
# the kinds the Windows rules below name, each with that signal
WINDOWS_SIGNALS = {f"Windows {name}": _POSIX_SIGNAL[name] for name in _WINDOWS_EXCEPTIONS.values() if name in _POSIX_SIGNAL}
# ... and those its loader ends a process with before the program runs (a missing DLL)
_WINDOWS_LOADER_STATUS = {"0xc0000135": "DLL not found", "0xc0000139": "entry point not found",
                          "0xc0000142": "DLL initialization failed"}

ERROR_LINES: tuple[Rule, ...] = (
    Rule("pydantic-value-error",
         _r(r"^\s*(?P<label>Value|Assertion) error, (?P<msg>.+?)(?: \[type=\w+_error\b.*)?$"),
         "Value error, User-specified max_model_len (131072) is greater than the derived max_model_len [type=value_error, input_value=1]",
         "vLLM >= 0.10 validates config with pydantic, which prints the ValueError's text after 'Value error, '",
         exception="ValueError", role="root", kind="python", anchors=("Value error", "Assertion error")),
    Rule("cuda-device-assert",
         _r(r"(?:^|\s)(?:[\w/.-]+\.(?:cu|cuh|cpp|py):\d+: )?(?P<msg>[^\s:/][^`]*?: block: \[\d+,\d+,\d+\], thread: \[\d+,\d+,\d+\] Assertion `.+` failed\.)"),
         "/pytorch/aten/src/ATen/native/cuda/Indexing.cu:1500: indexSelectSmallIndex: block: [32,0,0], thread: [63,0,0] Assertion `srcIndex < srcSelectDimSize` failed.",
         "a failed device-side assertion is printed once per GPU thread: it is one event and it is the trigger",
         exception="CUDA device-side assert", role="root", kind="cuda", anchors=("Assertion `",)),
    Rule("trtllm-cpp-exception",
         _r(r"\[TensorRT-LLM\]\[ERROR\] (?P<exc>(?:[a-z]\w*::)+[A-Z]\w*): (?:\[TensorRT-LLM\]\[ERROR\] )*(?P<msg>.+)$"),
         "[TensorRT-LLM][ERROR] tensorrt_llm::common::TllmException: [TensorRT-LLM][ERROR] Assertion failed: d == a + length (/app/x.cpp:418)",
         "TensorRT-LLM logs the C++ exception it caught: its class is the kind, the text after the tags the message",
         exception="tensorrt_llm::common::TllmException", role="root", kind="cpp", anchors=("[TensorRT-LLM][ERROR]",)),
    Rule("tensorrt-error-code",
         _r(r"^(?:\[TensorRT-LLM\]\[ERROR\] |\[TRT\] \[E\] |\[E\] (?:\[TRT\] )?(?:Error\[\d+\]: )?)*(?P<msg>(?:\d+: )?(?:\[[\w.]+::~?\w+::\d+\] |(?:\w+::)+~?\w+: )?Error Code \d+: [A-Z][\w ]{2,40} \(.+\))$"),
         "4: [runtime.cpp::deserializeCudaEngine::66] Error Code 4: Internal Error (Engine deserialization failed.)",
         "TensorRT's error record (where, then 'Error Code n: kind (details)'), whichever logger prints it: "
         "Triton's glog, TensorRT-LLM's tag, trtexec; the locator may be a function name or cut; the first one is the trigger",
         exception="TensorRT error", role="root", kind="cpp", anchors=("Error Code ",)),
    Rule("trtllm-assertion",
         _r(r"\[TensorRT-LLM\]\[ERROR\] (?:\[TensorRT-LLM\]\[ERROR\] )*(?P<msg>Assertion failed:(?: .*)?)$"),
         "[TensorRT-LLM][ERROR] Assertion failed: mpiSize == tp * pp (/src/cpp/tensorrt_llm/runtime/worldConfig.cpp:99)",
         "TLLM_CHECK failures: TensorRT-LLM throws them as TllmException",
         exception="tensorrt_llm::common::TllmException", role="root", kind="cpp", anchors=("[TensorRT-LLM][ERROR]",)),
    Rule("trtllm-cuda-runtime",
         _r(r"\[TensorRT-LLM\]\[ERROR\] (?:\[TensorRT-LLM\]\[ERROR\] )*(?P<msg>CUDA runtime error in .+)$"),
         "[TensorRT-LLM][ERROR] CUDA runtime error in ::cudaMallocAsync(ptr, n, mCudaStream->get()): out of memory (/x/tllmBuffers.h:112)",
         "TLLM_CUDA_CHECK: a CUDA runtime call failed (the call and the CUDA error name the cause)",
         exception="CUDA runtime error", role="root", kind="cuda", anchors=("[TensorRT-LLM][ERROR]",)),
    Rule("trtllm-thrown",
         _r(r"\[TensorRT-LLM\]\[ERROR\] (?:\[TensorRT-LLM\]\[ERROR\] )*(?P<msg>.+ \([\w./-]+\.(?:cpp|cu|cuh|h|hpp):\d+\))\s*$"),
         "[TensorRT-LLM][ERROR] Encountered an error in forward function: Input tensor 'x' not found; expected shape: (1) (/app/tensorrt_llm/cpp/tensorrt_llm/runtime/tllmRuntime.cpp:124)",
         "TLLM_THROW's text ends where it was thrown, '(file.cpp:line)': a TllmException, whichever "
         "function caught and logged it",
         exception="tensorrt_llm::common::TllmException", role="root", kind="cpp", anchors=("[TensorRT-LLM][ERROR]",)),
    Rule("trtllm-error",
         _r(r"\[TensorRT-LLM\]\[ERROR\] (?:\[TensorRT-LLM\]\[ERROR\] )*(?P<msg>.+)$"),
         "[TensorRT-LLM][ERROR] Encountered an error in forwardAsync function: std::bad_alloc",
         "TensorRT-LLM's C++ runtime logs fatal errors with this tag, often without a Python exception "
         "(the tag is where it was logged, not a kind)",
         exception="TensorRT-LLM error", role="root", kind="cpp", anchors=("[TensorRT-LLM][ERROR]",)),
    Rule("ggml-assert",
         _r(r"(?P<msg>GGML_ASSERT\(.{0,600}?\) failed|GGML_ASSERT: \S+:\d+: .+|(?<=\d: )GGML_ASSERT\((?P<cut>.{1,600})$)"),
         "/src/llama.cpp/ggml/src/ggml.c:3921: GGML_ASSERT(ggml_nelements(a) == ne0*ne1) failed",
         "llama.cpp / ggml abort on a failed assertion; the condition names the cause (behind the "
         "abort's `file:line: `, a line cut before `) failed` still reports it, and goes on below)",
         exception="GGML_ASSERT", role="root", kind="cpp", anchors=("GGML_ASSERT",), closes=_CONDITION_CLOSED),
    Rule("llvm-fatal-error",
         _r(r"LLVM ERROR: (?P<msg>\S.*)$"),
         "LLVM ERROR: Failed to translate TritonGPU to LLVM IR.",
         "LLVM's report_fatal_error (a compiler built on LLVM or MLIR: Triton, XLA, TVM) states why the "
         "compilation cannot go on, then the process aborts",
         exception="LLVM ERROR", role="root", kind="cpp", anchors=("LLVM ERROR: ",)),
    Rule("metal-validation-assert",
         _r(r"(?P<msg>-\[\w+ [\w:]+\]:\d+: failed assertion `(?:.*'|(?P<cut>[^']*)))$"),
         "-[MTLDebugComputeCommandEncoder setBuffer:offset:atIndex:]:1520: failed assertion `Set Buffer Validation index(31) must be < 31'",
         "Apple's Metal validation layer (and Metal's own checks) stops the process at a call that breaks "
         "the API's rules, naming the method and the rule; the abort follows",
         exception="Assertion failed", role="root", kind="cpp", anchors=(": failed assertion `",), closes=_QUOTE_CLOSED),
    Rule("objc-uncaught-exception",
         _r(r"\*\*\* Terminating app due to uncaught exception '(?P<exc>\w+)', reason:(?P<msg> ?'.+|(?P<cut>\s*))$"),
         "*** Terminating app due to uncaught exception 'NSInvalidArgumentException', reason: "
         "'-[_MTLCommandBuffer addCompletedHandler:]: failed assertion `Completed handler provided after commit call'",
         "the Objective-C runtime (macOS: Metal, MLX, PyTorch's MPS) names the exception's class and its reason "
         "before it aborts; libc++abi's 'uncaught exception of type NSException' below it names only the base class",
         role="root", kind="cpp", anchors=("Terminating app due to uncaught exception",), closes=_QUOTE_CLOSED),
    Rule("open-mpi-runtime-error",
         _r(r"^\[[\w.-]+:\d+\] (?:\[\[\d+,\d+\],\d+\] )?(?P<msg>(?:PRTE|PRRTE|ORTE|OPAL|PMIX) ERROR: .+)$"),
         "[worker:15806] PRTE ERROR: Bad parameter in file base/odls_base_default_fns.c at line 962",
         "Open MPI's runtime (PRRTE in Open MPI 5, ORTE before) could not start or wire up the ranks: "
         "mpirun / MPI_Comm_spawn fail after it, and TensorRT-LLM's workers never start",
         exception="MPI error", role="root", kind="cpp", anchors=("RTE ERROR: ", "OPAL ERROR: ", "PMIX ERROR: ")),
    Rule("mpi-errors-are-fatal",
         _r(r"^(?:\[[\w.-]+:\d+\] )?\*\*\* (?P<msg>An error occurred in MPI_\w+.*)$"),
         "[node-1:4242] *** An error occurred in MPI_Init_thread",
         "an MPI call failed under MPI_ERRORS_ARE_FATAL (Open MPI's and MPICH's banner): the call names "
         "the step, the banner's MPI_ERR_ line what went wrong; the job aborts after it",
         exception="MPI error", role="root", kind="cpp", anchors=("*** An error occurred in MPI_",)),
    Rule("ptxas-fatal",
         _r(r"^(?P<msg>ptxas\s+(?:[^\s,;]+, line \d+; )?(?:fatal|error)\s*: .+)$"),
         "ptxas fatal   : Value 'sm_121a' is not defined for option 'gpu-name'",
         "CUDA's PTX assembler (run by Triton and JIT builds) rejects its input, most often a GPU "
         "architecture newer than the bundled ptxas; Triton raises it as PTXASError. A diagnostic "
         "about the input names the place first ('ptxas /tmp/k.ptx, line 113; fatal   : Parsing error')",
         exception="PTXASError", role="root", kind="cpp", anchors=("ptxas fatal", "ptxas error", "; fatal ", "; error ")),
    Rule("ray-placement-group-wait",
         _r(r"(?P<msg>Waiting for creating a placement group of specs for \d+ seconds\..*)$"),
         "Waiting for creating a placement group of specs for 150 seconds. specs=[{'GPU': 1.0}, {'GPU': 1.0}]. Check `ray status` ...",
         "vLLM on Ray waits for GPUs the cluster does not have (a worker not joined, fewer GPUs than "
         "the parallel layout): the launch hangs here, and this is its last word (Ray's autoscaler, "
         "when it says which request no node can fulfill, says more)",
         exception="Ray placement group timeout", role="confirmation", kind="log_error",
         anchors=("Waiting for creating a placement group",)),
    Rule("exception-caught-at",
         _r(r"(?:^(?!.*\bstd(?:err|out) )|(?<=std(?:err|out) ))(?P<msg>\S.{8,600}?)\s*Exception caught at(?: file:|\s*f?i?l?$)"),
         "No kernel named _ZTSZZL17rms_norm_f32_syclPKfPfiif was found -46 (PI_ERROR_INVALID_KERNEL_NAME)Exception caught at file:/app/ggml/src/ggml-sycl.cpp, line:3528",
         "a C++ catch that prints what() and then where it caught it (ggml-sycl's SYCL_CHECK: a "
         "sycl::exception), the two glued without a space; the line is what() (behind a "
         "wrapper's stream label: LocalAI's `stderr `)",
         exception="sycl::exception", role="root", kind="cpp", anchors=("Exception caught at",)),
    Rule("assert-macro-condition",
         _r(r"(?P<msg>Assertion failed: (?:[\w.+-]*[/\\])*[\w.+-]+\.(?:cu|cuh|cpp|cc|c|h|hpp):\d+, condition: .+)$"),
         "Assertion failed: /sgl-workspace/DeepEP/csrc/kernels/internode.cu:483, condition: ibgda_get_state()->num_rc_per_pe >= num_channels",
         "a library's own assert macro (DeepEP's EP_DEVICE_ASSERT / EP_HOST_ASSERT) printing where it "
         "failed and the condition: the condition names what does not fit",
         exception="Assertion failed", role="root", kind="cpp", anchors=(", condition: ",)),
    Rule("glibc-assert",
         _r(r"(?<!\S)(?P<msg>(?:[^\s:]+: )?[^\s:]+\.\w+:\d+(?:: .{1,400}?:|:?\s+) ?Assertion [`'](?:.+['`] failed(?:\.|\s*$)|(?P<cut>[^'`]*)$))"),
         "python3: ../nptl/pthread_mutex_lock.c:94: ___pthread_mutex_lock: Assertion `mutex->__data.__owner == 0' failed.",
         "glibc's assert(): program, file:line, function, condition; the process aborts next (the "
         "program's name may have been read as the stream's label); UCX's own assert prints "
         "file:line and the condition (`proto_select.c:549  Assertion `...' failed`)",
         exception="Assertion failed", role="root", kind="cpp", anchors=("Assertion ",), closes=_CONDITION_CLOSED),
    Rule("glibc-assert-wrapped-head",
         _r(r"\S: (?P<msg>Assertion `(?:[^`]+' failed\.|(?P<cut>[^'`]*))\s*)$"),
         ">::size_type) const [with T = long int]: Assertion `idx < size()' failed.",
         "glibc's assert() whose head (program, file:line, a long C++ signature) a line break put on the "
         "lines above: the condition still names what does not fit",
         exception="Assertion failed", role="root", kind="cpp", anchors=("Assertion `",), closes=_CONDITION_CLOSED),
    Rule("nccl-watchdog-timeout",
         _r(r"(?P<msg>(?:\[Rank \d+\] )?Watchdog caught collective operation timeout.*)$"),
         "[Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=12, OpType=ALLREDUCE, Timeout(ms)=600000) ran for 600021 milliseconds before timing out.",
         "a collective timed out: some rank stopped taking part (look for its error first)",
         exception="NCCL watchdog timeout", role="cascade", kind="nccl", anchors=("Watchdog caught",)),
    Rule("watchdog-timeout",
         _r(r"(?P<msg>\bWatchdog timeout\b.*)$"),
         "[2025-06-22 16:13:55 TP0] Watchdog timeout (self.watchdog_timeout=300)",
         "a server's own watchdog (SGLang's scheduler) saw no progress for its timeout and kills the process: "
         "a hang, unless an error came first",
         exception="Watchdog timeout", role="cascade", kind="hang", anchors=("Watchdog timeout",)),
    Rule("cuda-no-kernel-image",
         _r(r"(?P<msg>(?:CUDA error: )?no kernel image is available for execution on the device.*"
            r"|CUDA kernel \S+ has no device code compatible with CUDA arch.*"
            r"|ggml-cuda was compiled without support for the current GPU architecture.*)$"),
         "RMSNorm failed with error code no kernel image is available for execution on the device",
         "a kernel was not built for this GPU's compute capability (ggml names the kernel and the arch: "
         "the launch failure after it is its consequence)",
         exception="CUDA error", role="root", kind="cuda", anchors=("no kernel image", "has no device code compatible",
                                                                    "compiled without support for the current GPU")),
    Rule("cuda-error-line",
         _r(r"(?P<msg>\b(?:(?:CUDA|Cuda) (?:driver |runtime )?(?:[Ee]rror|ERROR)\b|cuda(?:Error[A-Z]\w+)|CUDA_ERROR_[A-Z_]+|CUresult error\b).*"
            r"|(?:(?<=^Failed: )|(?<=: Failed: ))[^\s:']+\.(?:cu|cuh):\d+ '[^']+')$"),
         "Error: CUDA error 700 at /src/csrc/all_reduce.cu:112: an illegal memory access was encountered",
         "a C/C++ library's CUDA check: the CUDA error name or code says what failed (the CUDACHECK macro's "
         "\"Failed: <file.cu>:<line> '<error string>'\" names no CUDA, its file does; a driver API check "
         "names the CUresult)",
         exception="CUDA error", role="root", kind="cuda", anchors=("Failed: ", "CUDA error", "CUresult error", "CUDA driver error", "CUDA runtime error", "cudaError", "CUDA_ERROR_", "Cuda error", "Cuda driver error", "Cuda runtime error",
                  "CUDA Error", "CUDA ERROR", "CUDA driver Error", "CUDA runtime Error", "CUDA driver ERROR", "CUDA runtime ERROR")),
    Rule("accelerator-error-line",
         _r(r"(?P<msg>(?<![\w.])(?P<exc>(?:ROCm|HIP|CANN|MUSA|SYCL) error): \S.*)$"),
         "ROCm error: invalid device function",
         "another accelerator runtime's check, as ggml and PyTorch print it for ROCm/HIP, Ascend's CANN, "
         "Moore Threads' MUSA, SYCL: the runtime names what failed",
         role="root", kind="cuda", anchors=("ROCm error: ", "HIP error: ", "CANN error: ", "MUSA error: ", "SYCL error: ")),
    Rule("cann-error-code",
         _r(r"^(?:\[PID: \d+\] [\d:.-]+ )?(?:[A-Z][A-Za-z_]+\()?(?P<exc>E[A-Z]\d{4})\)?: (?:\[PID: \d+\] [\d:.-]+ )?(?P<msg>\S.{8,})$"),
         "EZ9999: [PID: 838] 2025-09-04-09:50:11.954.378 The error from device(chipId:6, dieId:0), there is an exception of aivec error",
         "Huawei CANN's error report (Ascend NPUs, vllm-ascend): its code (EZ9999 inner error, EE1001 "
         "invalid argument, EL0004 out of memory) and what the runtime saw; CANN 8 names the code "
         "(`Memory_Allocation_Failure(EL0004): ...`) behind the record's `[PID: n] time`",
         role="root", kind="cuda", anchors=("[PID: ", "EZ9999: ", "EE9999: ", "EE8888: ", "EI9999: ", "EL0004: ", "EE1001: ",
                                            "(EZ9999): ", "(EE9999): ", "(EI9999): ", "(EL0004): ", "(EE1001): ")),
    Rule("metal-command-buffer-error",
         _r(r"(?P<msg>.*\bkIOGPUCommandBufferCallbackError\w+.*)$"),
         "error: Insufficient Memory (00000008:kIOGPUCommandBufferCallbackErrorOutOfMemory)",
         "Apple's Metal failed a GPU command buffer (llama.cpp's and MLX's Metal backends): the IOGPU code says why",
         exception="Metal error", role="root", kind="cuda", anchors=("kIOGPUCommandBufferCallbackError",)),
    Rule("ssh-auth-failed",
         _r(r"^(?:[\w.-]+: )?(?P<msg>.*?\bPermission denied \((?:publickey|password|keyboard-interactive|gssapi-\w+|hostbased)[\w,-]*\)\.?)\s*$"),
         "localhost: worker@node-2: Permission denied (publickey,password).",
         "a multi-node launcher (pdsh for DeepSpeed, mpirun, torchrun over ssh) could not log in to a node "
         "(pdsh's 'node: ' before ssh's 'user@node: ' is left out): its exit code 255 below is the consequence",
         exception="ssh error", role="root", kind="native", anchors=("Permission denied (",)),
    Rule("shell-job-crash",
         _r(_SHELL_JOB.format(bash="Illegal instruction|Segmentation fault|Bus error|Floating point exception",
                              zsh=ZSH_CRASH_WORDS)),
         "start.sh: line 18:  1669 Illegal instruction     (core dumped) python -m vllm.entrypoints.openai.api_server --port 8001",
         "a shell (bash, dash, zsh) reports a job a native crash ended: the signal's words (and 'core dumped') "
         "are the error, then the command it ran; the script, line and pid before them only say where",
         exception="signal", role="root", kind="signal",
         anchors=("Illegal instruction", "Segmentation fault", "Bus error", "Floating point exception",
                  "illegal hardware instruction", "segmentation fault", "bus error", "floating point exception")),
    Rule("shell-job-signal",
         _r(_SHELL_JOB.format(bash="Killed|Aborted", zsh=ZSH_SIGNAL_WORDS)),
         "run.sh: line 3:  4242 Killed                  python3 -m vllm.entrypoints.openai.api_server",
         "a shell reports a job ended by SIGKILL (the host OOM killer, a scheduler) or by abort() "
         "(after a C++ exception, an assertion): the reason is printed before it, if anywhere",
         exception="signal", role="confirmation", kind="signal", anchors=("Killed", "Aborted", "killed", "abort", "IOT instruction")),
    Rule("systemd-service-signal",
         _r(r"(?P<msg>(?:\S+\.service: )?[Mm]ain process exited, code=(?:killed|dumped), status=(?P<signal>\d+)/\w+.*)$"),
         "ollama.service: Main process exited, code=killed, status=9/KILL",
         "systemd reports the service's main process ended by a signal (9/KILL: the OOM killer or a stop "
         "timeout; 11/SEGV, 6/ABRT: a crash): what the process printed before it says why, if anywhere",
         exception="signal", role="confirmation", kind="signal", anchors=("ain process exited, code=",)),
    Rule("systemd-service-exit",
         _r(r"(?P<msg>(?:\S+\.service: )?[Mm]ain process exited, code=exited, status=(?!0/)\d+/\S+)\s*$"),
         "ollama.service: Main process exited, code=exited, status=127/n/a",
         "systemd reports the service's main process exited with a failure status (127: the binary or a "
         "library it needs was not found; 203/EXEC: it could not be started): its own output says why",
         exception="exit status", role="confirmation", kind="native", anchors=("ain process exited, code=",)),
    Rule("argparse-usage-error",
         _r(r"^(?P<msg>[\w.-]+(?: [\w.-]+)?: error: (?:unrecognized arguments: |the following arguments are required: "
            r"|argument [-\w/, ]+: |ambiguous option: |one of the arguments |too few arguments|invalid choice: ).*)$"),
         "vllm: error: unrecognized arguments: --omni",
         "Python's argparse refused the command line (usage, then 'prog: error: ...', exit status 2): "
         "a flag the installed version does not have, a missing or invalid argument",
         exception="usage error", role="root", kind="log_error", anchors=(": error: ",)),
    Rule("illegal-instruction",
         _r(r"^(?P<msg>.*?(?:signal: illegal instruction|Illegal instruction|SIGILL: illegal instruction).*)$"),
         "time=2024-06-01T10:00:00.000Z level=ERROR msg=\"llama runner process has terminated: signal: illegal instruction (core dumped)\"",
         "the CPU lacks an instruction set the binary was built for (AVX2, AVX-512)",
         exception="SIGILL", role="root", kind="signal", anchors=("illegal instruction", "Illegal instruction")),
    Rule("cuda-malloc-out-of-memory",
         _r(r"^(?P<msg>.*?\bcudaMalloc(?:Async|Host|Managed)? failed: out of memory.*)$"),
         "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 14136.04 MiB on device 0: cudaMalloc failed: out of memory",
         "a native allocator's cudaMalloc found the device out of memory (llama.cpp/ggml, custom kernels)",
         exception="CUDA out of memory", role="root", kind="cuda", anchors=("cudaMalloc",)),
    Rule("cuda-malloc-failed",
         _r(r"^(?P<msg>.*?\bcudaMalloc(?:Async|Host|Managed)? failed: .+)$"),
         "cudaMalloc failed: initialization error",
         "a native allocator's cudaMalloc failed for another reason: the CUDA error string says which",
         exception="CUDA error", role="root", kind="cuda", anchors=("cudaMalloc",)),
    Rule("native-function-failure",
         _r(r"^(?P<msg>[a-z][a-z0-9]*_[a-z0-9_]+: (?:error: .+|(?:invalid|failed to|unable to|cannot|could not|unknown|missing|wrong|unsupported|not enough|error [a-z]+ing\b) .+"
            r"|[\w ]{1,60}\bfailed with (?:status|error|code)\b.*))$"),
         "gguf_init_from_file: invalid magic characters 'tjgg', expected 'GGUF'",
         "a C library names the function that failed, then why, or says `error:` (llama.cpp, ggml, GGUF loaders); "
         "the callers that give up after it print their own 'failed to load' lines below it",
         exception="native error", role="root", kind="native", anchors=(": invalid", ": failed to", ": unable to", ": cannot", ": could not", ": unknown", ": missing", ": wrong", ": unsupported", ": not enough", ": error: ", ": error ",
                                                                        " failed with status", " failed with error", " failed with code")),
    Rule("program-failure",
         _r(r"^(?P<msg>(?!(?:note|hint|tip|warning|info|debug|help|usage)\b)[a-z][a-z0-9]*(?:[.-][a-z0-9]+)*: "
            r"(?:can't|cannot|unable to|failed to|could not|couldn't) .+)$"),
         "nslookup: can't resolve 'trainer-master-0': Name does not resolve",
         "a Unix program's own error, as err(3) and perror print it: its name, then what it could not do "
         "(nslookup, mkdir, cp, ssh): the step that needed it fails below. Weighed as a logged error: "
         "a library's function printing its advice the same way ('decode: cannot decode batches with "
         "this context (use llama_encode() instead)') is no runtime's error",
         exception="logged error", role="root", kind="log_error",
         anchors=(": can't ", ": cannot ", ": unable to ", ": failed to ", ": could not ", ": couldn't ")),
    Rule("failed-with-exception-statement",
         _r(r"^(?P<msg>(?:[A-Z][\w.-]*|[a-z][\w.-]*)(?: [\w.-]+){0,2} failed with (?:an? )?(?:exception|error)s?: \S.{8,})$"),
         "Runner failed with exception: Runner has been initializing for too long: 300 seconds",
         "a supervisor (a platform's runner, a task queue) states that what it ran failed, and why, with no "
         "exception of its own: weighed as a logged error, below any error the run printed itself",
         exception="logged error", role="root", kind="log_error",
         anchors=("failed with exception: ", "failed with error: ", "failed with an exception: ", "failed with an error: ")),
    Rule("error-doing-statement",
         _r(r"^(?P<msg>error (?:[a-z]+ing) [\w ./-]{1,60}: \S.+)$"),
         "error loading model: unknown (magic, version) combination: 67676a74, 00000003; is this really a GGML file?",
         "a C/C++ program says what it was doing and why that failed, with no function in front (llama.cpp "
         "before its loader named itself): the callers that give up after it print their own lines below",
         exception="native error", role="root", kind="native", anchors=("error ",)),
    Rule("shell-command-not-found",
         _r(r"^(?:[\w./-]*\b(?:sh|bash|dash|zsh|ksh)|[\w./-]+\.sh)(?:: line \d+|: \d+)?: (?P<msg>command not found: \S+|\S+: (?:command )?not found)\s*$"),
         "/bin/sh: 1: /usr/local/cuda/bin/nvcc: not found",
         "a shell could not find a program a script or a build step runs (dash: 'sh: 1: nvcc: not found'; "
         "bash: 'line 3: nvcc: command not found'; zsh: 'command not found: nvcc'): the step fails below it",
         exception="command not found", role="root", kind="native", anchors=(": not found", "command not found")),
    Rule("status-code-error",
         _r(r"(?<![\w.])(?P<exc>" + STATUS_CODES + r"): (?P<msg>\S.*)$"),
         "RESOURCE_EXHAUSTED: Error loading program 'jit_step': Attempting to reserve 6.14G at the bottom of memory. That was not possible.",
         "an absl / gRPC status printed as CODE: message (XLA and the TPU runtime, gRPC services, Triton's "
         "model states): the code says what kind of failure, the message what failed",
         role="root", kind="native",
         anchors=tuple(f"{code}: " for code in STATUS_CODES.split("|"))),
    Rule("fatal-check",
         _r(r"(?P<msg>(?:\[\w+\]\[FATAL\] [^\s:]+: )?Check failed: .+)$"),
         "[TM][FATAL] kernels/apply_token_bitmask_inplace_cuda.cu(212): Check failed: logits_shape.first == bitmask_shape.first",
         "a C++ CHECK macro failed (glog, TVM, TurboMind, abseil): the condition names the cause; the process aborts",
         exception="fatal check", role="root", kind="cpp", anchors=("Check failed:",)),
    Rule("cuda-check-at-line",
         _r(r"^(?P<msg>Error [a-z][\w ]{2,80} at line \d+ in file \S+)$"),
         "Error operation not supported at line 351 in file /src/bitsandbytes/csrc/pythonInterface.c",
         "bitsandbytes' CUDA check: the CUDA error string, then where",
         exception="CUDA error", role="root", kind="cuda", anchors=(" at line ",)),
    Rule("go-exec-signal",
         _r(r"^(?P<msg>.*?\bsignal: (?P<signame>killed|segmentation fault|aborted|bus error|floating point exception|hangup)\b.*)$"),
         "Error: llama runner process has terminated: signal: killed",
         "Go's os/exec reports how a child process ended (ollama's runner): the signal by name",
         exception="signal", role="confirmation", kind="signal", anchors=("signal: ",)),
    Rule("signal-named-in-report",
         _r(r"(?P<msg>\b(?:[Uu]ncaught|[Cc]aught|[Rr]eceived|[Gg]ot|[Ff]atal)(?: signal)?(?: \d+)? \(?(?P<signame2>SIG(?:SEGV|BUS|ILL|FPE|ABRT|TRAP))\b.*)$"),
         "error: Uncaught SIGSEGV (SEGV_MAPERR) at 0x328 on gpu-node-3 pid 449777 tid 449785",
         "a crash handler names the fatal signal it caught (Cosmopolitan's llamafile, custom handlers, "
         "Android's 'Fatal signal 6 (SIGABRT)'): a native crash; the register dump or backtrace that follows says where",
         exception="signal", role="root", kind="signal",
         anchors=("SIGSEGV", "SIGBUS", "SIGILL", "SIGFPE", "SIGABRT", "SIGTRAP")),
    Rule("nvidia-xid",
         _r(r"NVRM: Xid \(PCI:[\w:.]+\): (?P<msg>\d+, .+)$"),
         "NVRM: Xid (PCI:0000:3b:00): 79, pid=1911, name=python3, GPU has fallen off the bus.",
         "the NVIDIA driver reports a GPU fault by its Xid (79: the GPU fell off the bus; 48, 63, 64: ECC; "
         "13, 31: a kernel's bad access or an engine exception): the process's CUDA error or crash after it is "
         "its consequence",
         exception="NVIDIA Xid error", role="root", kind="native", anchors=("NVRM: Xid",)),
    Rule("android-tombstone-signal",
         _r(r"^(?P<msg>signal (?P<signal>\d+) \(SIG[A-Z]+\), code -?\d+ \(\w+\), fault addr\b.*)$"),
         "signal 11 (SIGSEGV), code 1 (SEGV_MAPERR), fault addr 0x0000000000001160",
         "Android's crash dump (a tombstone, or debuggerd's report in logcat) names the signal a native crash "
         "died of; the backtrace after it says where",
         exception="signal", role="root", kind="signal", anchors=("fault addr",)),
    Rule("amdgpu-page-fault",
         _r(r"(?P<msg>(?:amdgpu [\w:.]+: (?:amdgpu: )?)?\[\w+\] (?:(?:no-)?retry )?page fault \(src_id:.*)$"),
         "amdgpu 0000:03:00.0: amdgpu: [gfxhub] page fault (src_id:0 ring:40 vmid:8 pasid:32781)",
         "the AMD GPU driver reports a kernel's access to memory it does not map (the HIP counterpart of "
         "an illegal memory access; the process's HIP error or abort after it is its consequence)",
         exception="GPU page fault", role="root", kind="native", anchors=("page fault (src_id",)),
    Rule("intel-gpu-runtime-abort",
         _r(r"^(?P<msg>Abort was called at \d+ line in file:.*)$"),
         "Abort was called at 63 line in file:",
         "Intel's GPU compute runtime (NEO, under SYCL, IPEX and oneAPI backends) aborts on a check it "
         "cannot recover from; the runtime's source file follows on the next line",
         exception="Intel GPU runtime abort", role="root", kind="native", anchors=("Abort was called at",)),
    Rule("kernel-fault-report",
         _r(r"(?P<msg>(?:traps: )?[\w.:-]+\[\d+\]:? (?:trap )?(?P<signame>general protection fault|segfault|invalid opcode|divide error)\b"
            r".*?(?: in (?P<site>[\w.+-]+?)(?:\.\d+)*\[[0-9a-f]+\+[0-9a-f]+\])?)\s*$"),
         "traps: python3[3838286] general protection fault ip:7f8304036898 sp:7f7fde7fa710 error:0 in libc.so.6[7f8304036000+195000]",
         "the kernel's report of a process it killed for a fault (dmesg, journalctl -k): a segfault or general "
         "protection fault, an invalid opcode (an instruction the CPU lacks), a divide error; the library named "
         "after 'in' is where",
         exception="signal", role="root", kind="signal",
         anchors=("general protection fault", "segfault at", "invalid opcode", "divide error")),
    Rule("signal-received",
         _r(r"^(?P<msg>Signal \((?P<signal>\d+)\) received\.?)\s*$"),
         "Signal (11) received.",
         "a C++ server's fatal signal handler (NVIDIA Triton's): a native crash; the numbered stack that "
         "follows says where",
         exception="signal", role="root", kind="signal", anchors=(") received",)),
    Rule("caught-signal",
         _r(r"(?P<msg>Caught signal (?P<signal>\d+) \(.*)$"),
         "[node1:4242:0:4300] Caught signal 11 (Segmentation fault: address not mapped to object at address (nil))",
         "UCX's (and others') fatal signal handler: a native crash",
         exception="signal", role="root", kind="signal", anchors=("Caught signal",)),
    Rule("cpp-unhandled-exception",
         _r(r"Unhandled exception: (?P<exc>[\w:]{1,300})\. what\(\): (?P<msg>.+)$"),
         "[2023-07-11 15:20:41,680 E 42067 42067] logging.cc:97: Unhandled exception: St13runtime_error. what(): NCCL Error 5: invalid usage",
         "Ray's C++ core logs an uncaught C++ exception (its type mangled) before it aborts",
         role="root", kind="cpp", anchors=("Unhandled exception:",)),
    Rule("dotnet-unhandled-exception",
         _r(r"^An unhandled exception of type '(?P<exc>[A-Za-z_][\w.]*)' occurred in [^:']+: '?(?P<msg>.+?)'?$"),
         "An unhandled exception of type 'System.IO.FileNotFoundException' occurred in LLamaSharp.dll: 'Could not find file model.gguf'",
         "a .NET program (ONNX Runtime GenAI's and llama.cpp's C# bindings) died of an exception nobody caught, "
         "in Visual Studio's words (the console's 'Unhandled exception. System.X: ...' names it as Python does)",
         role="root", kind="python", anchors=("An unhandled exception of type '",)),
    Rule("rust-panic",
         _r(r"(?P<msg>thread '[^']*' panicked at .+)$"),
         "thread 'main' panicked at 'called `Result::unwrap()` on an `Err` value: Os { code: 2 }', router/src/main.rs:221:43",
         "a Rust program (TGI's router and launcher) aborted on a panic",
         exception="Rust panic", role="root", kind="cpp", anchors=("panicked at",)),
    Rule("go-panic",
         _r(r"^(?P<msg>panic: .+)$"),
         "panic: runtime error: invalid memory address or nil pointer dereference",
         "a Go program (ollama) aborted on a panic; the goroutine dump follows",
         exception="Go panic", role="root", kind="cpp", anchors=("panic: ",)),
    Rule("launcher-signal",
         _r(r"(?:\[(?:'[^']*'(?:, )?)+\] )?(?P<msg>.*(?:exits with return code = -(?P<signal>\d+)|exited on signal (?P<signal2>\d+)|signaled to shutdown with signal (?P<signal3>\d+)|terminated with signal (?P<signal4>\d+)"
            r"|(?:died|was killed|was terminated|terminated) (?:due to|by) signal (?P<signal5>\d+)).*)$"),
         "[2024-05-01 10:00:00,123] [ERROR] [launch.py:321:sigkill_handler] ['/usr/bin/python', '-u', 'train.py'] exits with return code = -9",
         "DeepSpeed, mpirun and TGI report a child killed by a signal (9: usually the host OOM killer); so do "
         "compiler drivers of the tools they ran (nvcc: \"'cicc' died due to signal 9 (Kill signal)\", gcc: "
         "\"cc1plus: fatal error: Killed signal terminated program\" is the shell's words)",
         exception="signal", role="confirmation", kind="signal",
         anchors=("return code = -", "exited on signal", "with signal", "due to signal", "by signal")),
    Rule("ray-memory-pressure",
         _r(r"^(?P<msg>.*?(?:killed due to memory pressure \(OOM\)|Memory on the node .{0,400}? was \d+(?:\.\d+)?GB / \d+(?:\.\d+)?GB"
            r"|the out of memory issue: \S+/ray-oom-prevention\b).*)$"),
         "(raylet) [2024-05-01 10:00:00,000 E 123 123] (raylet) node_manager.cc:3069: 1 Workers (tasks / actors) killed due to memory pressure (OOM), 0 Workers crashed due to other reasons at node",
         "Ray's memory monitor killed a worker: the host ran out of memory (the link its report ends with "
         "says so where an excerpt cut the report's head)",
         exception="SIGKILL", role="confirmation", kind="oom_kill", anchors=("memory pressure", "Memory on the node", "ray-oom-prevention")),
    Rule("tensorrt-error",
         _r(r"^(?:\[TRT\] \[E\] |\[E\] (?:\[TRT\] )?(?:Error\[\d+\]: )?)(?P<msg>.+)$"),
         "[TRT] [E] 6: The engine plan file is generated on an incompatible device, expecting compute 8.0 got compute 8.9, please rebuild.",
         "TensorRT's logger at error severity (Python's trt.Logger, trtexec's '[E] Error[n]:'); the first one is the trigger, later ones are consequences",
         exception="TensorRT error", role="root", kind="cpp", anchors=("[TRT] [E]", "[E] ")),
    Rule("torch-elastic-signal",
         _r(r"(?P<msg>failed \(exitcode: -(?P<signal>\d+)\) local_rank: .*)$"),
         "failed (exitcode: -9) local_rank: 0 (pid: 62498) of binary: /usr/bin/python",
         "torchrun reports a child killed by a signal (-9 is usually the host OOM killer)",
         exception="signal", role="confirmation", kind="signal", anchors=("exitcode: -",)),
    Rule("torch-elastic-summary-signal",
         _r(r"^(?P<msg>exitcode\s+: -(?P<signal>\d+) \(pid: \d+\))\s*$"),
         "exitcode  : -9 (pid: 3309)",
         "the 'Root Cause (first observed failure)' block of torchrun's ChildFailedError summary: "
         "the rank that failed first ended by this signal",
         exception="signal", role="confirmation", kind="signal", anchors=("exitcode  : -", "exitcode : -")),
    Rule("dynamic-loader-error",
         _r(r"(?:^|(?<=\S)(?=/)|(?<=[Ee]rror: ))(?P<msg>(?:[\w ]{1,40}: ){0,4}?[^\s:'\"(]*\.so(?:\.[\w.]+)?: (?:undefined symbol: [\w.$@]+|cannot open shared object file: [\w ]+|version [`'][^']+' not found\b.*))\s*$"),
         "/opt/venv/lib/python3.12/site-packages/flash_attn_2_cuda.cpython-312-x86_64-linux-gnu.so: undefined symbol: _ZN3c105ErrorC2E",
         "the dynamic loader could not load a library (dlerror()'s text, behind at most a few callers' words, "
         "or its absolute path glued to another writer's text): "
         "a build against another torch/CUDA/glibc, or a library not installed. Python raises it as ImportError; "
         "native servers (Triton's backends) and wrappers that keep only the text print it alone "
         "(or quote it after their own words: '... with error: libcublasLt.so.11: cannot open ...')",
         exception="dynamic loader error", role="root", kind="native",
         anchors=(": undefined symbol: ", "cannot open shared object file", "' not found")),
    Rule("dynamic-loader-any-of",
         _r(r"(?P<msg>Unable to load any of \{[^{}]*\.so[^{}]*\})"),
         "Unable to load any of {libcudnn_ops.so.9.1.0, libcudnn_ops.so.9.1, libcudnn_ops.so.9, libcudnn_ops.so}",
         "a library that loads its parts by name (cuDNN 9, under CTranslate2 or ONNX Runtime) found none of the "
         "names it tried: the library is not installed where the loader looks",
         exception="dynamic loader error", role="root", kind="native", anchors=("Unable to load any of {",)),
    Rule("compiler-diagnostic",
         _r(r"^(?P<msg>nvcc (?:fatal|error)\s*: .+|[^\s:]+\.(?:c|cc|cpp|cxx|cu|cuh|h|hpp)(?::\d+){1,2}: (?:fatal )?error: .+"
            # nvcc's front end (EDG): `x.cu(12): error: ...`, and its count of them when it gives up
            r"|[^\s:]+\.(?:cu|cuh|h|hpp|cpp)\(\d+\): (?:catastrophic )?error: .+|\d+ errors? detected in the compilation of .+"
            r"|(?:cc1plus|cc1|gcc|g\+\+|c\+\+|clang(?:\+\+)?|collect2|ld): (?:fatal )?error: .+)$"),
         "nvcc fatal   : Unsupported gpu architecture 'compute_89'",
         "a compiler (or its driver: cc1plus, collect2) refused the code a JIT or extension build gave it (DeepSpeed ops, torch "
         "cpp_extension, Triton's helpers, FlashInfer's JIT): the build tool's failure below it is the consequence",
         exception="compiler error", role="root", kind="native",
         anchors=("nvcc fatal", "nvcc error", ": error: ", ": fatal error: ", "): catastrophic error: ",
                  " detected in the compilation of ")),
    Rule("cmake-error",
         _r(r"^(?P<msg>CMake Error(?: (?:at|in) [^:\s]+(?::\d+)?(?: \(\w+\))?)?:.*)$"),
         "CMake Error at CMakeLists.txt:8 (project):",
         "CMake could not configure a build (an extension or a wheel built from source: no CUDA "
         "compiler found, a package missing); its text follows on the indented lines below; the "
         "build tool's and pip's failures after it are the consequence",
         exception="CMake Error", role="root", kind="native", anchors=("CMake Error",)),
    Rule("native-abort-at-source",
         _r(r"^(?:\[[^\]]*\] )?(?:[\w.+-]*[/\\])*[\w.+-]+\.(?:c|cc|cpp|cxx|cu|cuh|h|hpp):\d+: (?P<msg>(?!warning|note|info)[^\n]*?\b(?:[Ff]ail(?:ed|ure|s)?|[Ee]rror|does not support|not supported|[Cc]annot|[Uu]nable|[Ii]nvalid|[Aa]bort(?:ed)?|out of memory|exceeds?|mismatch)\b.*)$"),
         "llama.cpp:11942: The current context does not support K-shift",
         "native code reporting a failure at its source line with no level or type: ggml's "
         "GGML_ABORT, Ray's RAY_LOG(FATAL) behind its header, CUDA checks; the abort or "
         "signal that follows is its consequence",
         exception="native error", role="root", kind="native",
         anchors=(".c:", ".cc:", ".cpp:", ".cu:", ".h:", ".hpp:", ".cxx:", ".cuh:")),
    Rule("go-runtime-signal",
         _r(r"^(?P<msg>(?P<signame2>SIGSEGV|SIGBUS|SIGABRT|SIGILL|SIGFPE): (?:segmentation violation|bus error|abort|illegal instruction|floating-point exception).*)$"),
         "SIGSEGV: segmentation violation",
         "the Go runtime (ollama's server) reports a fatal signal, often raised in C code it called "
         "(\"signal arrived during cgo execution\"): the goroutine dump follows",
         exception="signal", role="root", kind="signal",
         anchors=("SIGSEGV: ", "SIGBUS: ", "SIGABRT: ", "SIGILL: ", "SIGFPE: ")),
    Rule("ray-node-marked-dead",
         _r(r"(?P<msg>(?:\[\w+\] )?(?:The node with node id: \w+ .{0,200}?has been marked dead because [^\"]+|Exiting because this node manager has mistakenly been marked as dead by the GCS[^\"]*))"),
         "(raylet) The node with node id: 0f21 and address: 10.0.0.51 and node name: 10.0.0.51 has been marked dead because the detector has missed too many heartbeats from it.",
         "Ray's GCS stopped hearing from a node (missed heartbeats, failed health checks) and declared it dead: "
         "its workers and actors die with it (a host overloaded, OOM-killed or cut off from the network)",
         exception="Ray node marked dead", role="root", kind="native",
         anchors=("has been marked dead", "marked as dead by the GCS")),
    Rule("exit-code-signal",
         _r(r"^(?P<msg>Exit code: -(?P<signal>\d+))\s*$"),
         "Exit code: -9",
         "SGLang's launcher prints the scheduler's negative exit code when it was killed",
         exception="signal", role="confirmation", kind="signal", anchors=("Exit code: -",)),
    Rule("oom-killer",
         _r(r"(?P<msg>(?:[Oo]ut of memory|Memory cgroup out of memory): Killed process \d+ \([^)]*\).*|oom-kill:constraint=CONSTRAINT_\w+,.*)$"),
         "[12345.678] Out of memory: Killed process 4242 (python3) total-vm:1234kB, anon-rss:99kB",
         "the kernel's OOM killer (dmesg) confirms a host-memory kill: its summary ('oom-kill:constraint=...', "
         "a container's memory cgroup) and its kill line",
         exception="SIGKILL", role="confirmation", kind="oom_kill",
         anchors=("out of memory: Killed", "Out of memory: Killed", "oom-kill:constraint=")),
    Rule("scheduler-oom-kill",
         _r(r"(?P<msg>(?:Detected \d+ oom[-_]kill events?\b|task \d+: Out Of Memory\b|(?:Reason|reason)[:=]\s*\"?OOMKilled\b).*)$"),
         "slurmstepd: error: Detected 1 oom-kill event(s) in StepId=4242.0. Some of your processes may have been killed by the cgroup out-of-memory handler.",
         "a scheduler or container runtime reports that the kernel OOM-killed its task in the job's memory "
         "cgroup (Slurm's slurmstepd and srun, Kubernetes' OOMKilled): the host memory limit, not the GPU's",
         exception="SIGKILL", role="confirmation", kind="oom_kill",
         anchors=("oom-kill event", "oom_kill event", ": Out Of Memory", "OOMKilled")),
    Rule("segfault",
         _r(r"(?P<msg>(?:Fatal Python error: )?(?:Segmentation fault(?: \(core dumped\))?|.*\bSegfault encountered|.*\[signal SIGSEGV: segmentation violation).*)$"),
         "Fatal Python error: Segmentation fault",
         "a native crash: the faulthandler stack that follows says where",
         exception="SIGSEGV", role="root", kind="signal", anchors=("Segmentation fault", "Segfault", "SIGSEGV")),
    Rule("hsa-memory-access-fault",
         _r(r"(?P<msg>Memory access fault by GPU node-\d+\b.*)$"),
         "Memory access fault by GPU node-3 (Agent handle: 0x13e852f0) on address 0x77d445e00000. Reason: Unknown.",
         "ROCm's runtime (HSA) reports a kernel's bad GPU memory access and aborts the process: AMD's "
         "illegal memory access, printed without the process's prefix and with no Python traceback",
         exception="GPU memory access fault", role="root", kind="native", anchors=("Memory access fault by GPU",)),
    Rule("hsa-memory-critical-error",
         _r(r"(?P<msg>Memory critical error by agent node-\d+\b.*)$"),
         "Memory critical error by agent node-0 (Agent handle: 0x4694bee0) on address 0x47934000. Reason: Memory in use.",
         "ROCm's runtime (HSA) reports a fatal memory error of a GPU agent (the sibling of its memory access "
         "fault, from the same handler) and aborts the process",
         exception="GPU memory critical error", role="root", kind="native", anchors=("Memory critical error by agent",)),
    Rule("gpu-call-macro-failure",
         _r(r"(?P<msg>(?:\S+\.(?:cpp|cu|cc|hip|h):\d+ )?fail(?:ed)? to call \S.*?\[(?P<exc>HIP error|CUDA error)\].*)$"),
         "[AITER] /aiter/jit/build/blob/asm_fmha_fwd_v3_gfx942.cpp:141 fail to call hipModuleLaunchKernel(kernel_func, gdx, gdy, gdz, bdx, 1, 1, 0, s.stream_id_, NULL, args) ---> [HIP error](invalid resource handle)",
         "a kernel library's call-checking macro (AMD's aiter HIP_CALL) names the runtime call that failed and "
         "the runtime's reason in brackets",
         role="root", kind="cuda", anchors=("[HIP error]", "[CUDA error]")),
    Rule("hsa-queue-abort",
         _r(r"\bQueue 0x[0-9a-fA-F]+ aborting with error : (?P<exc>HSA_STATUS_ERROR_\w+):? ?(?P<msg>.*)$"),
         ":0:rocdevice.cpp            :3675: 2139490044663 us:  Callback: Queue 0x7ee7b4200000 aborting with error : "
         "HSA_STATUS_ERROR_MEMORY_APERTURE_VIOLATION: The agent attempted to access memory beyond the largest legal address. code: 0x29",
         "ROCm's runtime aborts a GPU queue on a kernel's fault and names it by its HSA status (an "
         "aperture violation, an illegal instruction, out of resources); the kernel's name follows",
         role="root", kind="native", anchors=("aborting with error : HSA_STATUS",)),
    Rule("fatal-abort",
         _r(r"(?P<msg>Fatal Python error: Aborted.*)$"),
         "Fatal Python error: Aborted",
         "abort() from native code, usually after a C++ exception",
         exception="SIGABRT", role="root", kind="signal", anchors=("Fatal Python error",)),
    Rule("fatal-python-error",
         _r(r"Fatal Python error: (?P<msg>(?!Segmentation fault|Aborted)\S.*)$"),
         "Fatal Python error: none_dealloc: deallocating None",
         "CPython's own fatal error (Py_FatalError): a broken interpreter invariant, most often a C "
         "extension's refcount or GIL bug; the function that noticed it comes first",
         exception="Fatal Python error", role="root", kind="native", anchors=("Fatal Python error",)),
    Rule("nccl-warn",
         _r(r"NCCL WARN (?P<msg>.+)$"),
         "node1:4242:4300 [3] NCCL WARN Cuda failure 'out of memory'",
         "NCCL warnings usually follow an earlier trigger on some rank: a cascade",
         exception="NCCL error", role="cascade", kind="nccl", anchors=("NCCL WARN",)),
    Rule("c10d-store-unreachable",
         # (not its "has failed to connect to [localhost]:29500" warnings: each attempt of the retry loop)
         _r(r"(?P<msg>(?:\[c10d\] )?The client socket has timed out after \S+ while trying to connect to .+)$"),
         "[E socket.cpp:922] [c10d] The client socket has timed out after 1800s while trying to connect to (10.0.0.2, 29500).",
         "a rank could not reach the rendezvous or weight-sync store (torch's TCPStore): a wrong or unreachable "
         "MASTER_ADDR, a port a firewall closed, a container's bridge address; the collectives that wait "
         "for this rank time out after it",
         exception="c10d store unreachable", role="root", kind="cpp", anchors=("client socket has",)),
    Rule("nccl-call-failed",
         _r(r"(?P<msg>(?:\bnccl[A-Z]\w* failed|\bNCCL (?:error|failure)(?! in: )):? .*?\b(?:unhandled (?:cuda|system) error|"
            r"internal error|invalid (?:usage|argument)|remote process exited|unknown result code).*)$"),
         "horovod/common/ops/nccl_operations.cc:41] NCCL error: ncclCommInitRank failed: unhandled cuda error",
         "an NCCL call's result as a C++ caller prints it (Horovod, custom all-reduce, TensorRT-LLM's plugins: "
         "'Failed, NCCL error <file>:183 'unknown result code''), in ncclGetErrorString's words: NCCL's own WARN "
         "lines, when logged, say what failed under it (torch's `NCCL error in: <file>` is its exception's text)",
         exception="NCCL error", role="cascade", kind="nccl",
         anchors=(" failed: unhandled", " failed: internal", " failed: invalid", " failed: remote",
                  "NCCL error", "NCCL failure")),
    Rule("ucx-log-error",
         _r(r"\bUCX\s+ERROR\s+(?P<msg>\S.*)$"),
         "[1746690477.974497] [llm206:611  :0]     ucp_context.c:1268 UCX  ERROR cuIpcOpenMemHandle failed",
         "UCX (the transport under NIXL, MPI and LMCache) logs its own failure before its caller's "
         "error code: what failed",
         exception="UCX error", role="cascade", kind="ucx", anchors=("UCX  ERROR", "UCX ERROR")),
    Rule("ucx-log-warn",
         _r(r"\bUCX\s+WARN\s+(?P<msg>\S.*)$"),
         "[1746690477.974497] [llm206:611  :0]     ucp_context.c:1268 UCX  WARN  transports 'cuda_ipc','cuda_copy' are not available",
         "a UCX warning (a transport missing, a setting ignored): the cause only of a log that "
         "states nothing stronger",
         exception="UCX warning", role="cascade", kind="ucx", anchors=("UCX  WARN", "UCX WARN")),
    Rule("elastic-death-signal",
         _r(r"(?P<msg>Received (?:(?P<signal>\d+)|Signals\.(?P<signame2>SIG[A-Z]+)) death signal, shutting down workers)"),
         "W1221 17:13:59.240000 46660 torch/distributed/elastic/agent/server/api.py:704] Received 1 death signal, shutting down workers",
         "torchrun's agent was sent a signal (SIGHUP: the terminal or session closed; SIGTERM: the scheduler); "
         "torch before 2.4 names it as Python's enum prints it ('Received Signals.SIGHUP death signal')",
         exception="signal", role="confirmation", kind="signal", anchors=("death signal",)),
    Rule("signal-received-by-pid",
         _r(r"(?P<msg>Signal (?P<signal>\d+) \(SIG\w+\) received by PID \d+)"),
         "traceback : Signal 9 (SIGKILL) received by PID 14750",
         "torch.distributed.elastic's report of a rank killed by a signal (the killer's reason is the cause)",
         exception="signal", role="confirmation", kind="signal", anchors=("received by PID",)),
    Rule("gpu-math-library-error",
         _r(r"^(?P<exc>(?:(?:roc|hip)[A-Za-z]+|MIOpen(?:\(HIP\))?) [Ee]rror):?\s(?P<msg>.+)$"),
         "rocBLAS error: Cannot read /opt/rocm/lib/rocblas/library/TensileLibrary.dat: Illegal seek for GPU arch : gfx1150",
         "ROCm's math libraries (rocBLAS, hipBLASLt, MIOpen) print their failure and abort: the library names the kind",
         exception="ROCm library error", role="root", kind="cpp", anchors=(" error:", " Error:", " error ", " Error ")),
    Rule("vulkan-error",
         _r(r"(?P<msg>(?:vk::\w+(?:::\w+)*: )?(?:Error(?:OutOf(?:Device|Host|Pool)Memory|DeviceLost|InitializationFailed|MemoryMapFailed|FeatureNotPresent|IncompatibleDriver|TooManyObjects|FormatNotSupported|Unknown)|VK_ERROR_[A-Z_]+)\b.*)$"),
         "ggml_vulkan: vk::Device::allocateMemory: ErrorOutOfDeviceMemory",
         "a Vulkan call failed (Vulkan-HPP's vk::SystemError text, or the VkResult name): llama.cpp's and MLC's Vulkan backends",
         exception="Vulkan error", role="root", kind="cpp", anchors=("ErrorOutOf", "ErrorDeviceLost", "ErrorInitializationFailed",
                                                                     "ErrorMemoryMapFailed", "ErrorFeatureNotPresent", "ErrorIncompatibleDriver",
                                                                     "ErrorTooManyObjects", "ErrorFormatNotSupported", "ErrorUnknown", "VK_ERROR_")),
    Rule("absl-failure-signal",
         _r(r"\*\*\* (?P<msg>(?P<exc>SIG[A-Z]+) received at time=\d+.*?)(?:\s*\*\*\*)?\s*$"),
         "*** SIGSEGV received at time=1722289279 on cpu 61 ***",
         "abseil's failure signal handler (Ray, gRPC, TensorFlow): a native crash; the banner's asterisks are no words of it",
         exception="SIGSEGV", role="root", kind="signal", anchors=("received at time=",)),
    *(Rule(f"windows-{name.replace(' ', '-')}",
           _r(rf"^(?P<msg>Exception {code} .*)$"),
           f"Exception {code} 0x0 0x0 0x7fffb8f22f58",
           f"Go's runtime on Windows reports a native exception ({name}) in a loaded library (ollama's runner)",
           exception=f"Windows {name}", role="root", kind="signal", anchors=(f"Exception {code}",))
      for code, name in _WINDOWS_EXCEPTIONS.items()),
    *(Rule(f"windows-exit-{name.replace(' ', '-')}",
           _r(rf"(?P<msg>.*\bexit (?:status|code):? {code}\b.*)$"),
           f"llama.cpp terminated unexpectedly: llama.cpp exit status: exit status {code}",
           f"a process on Windows exited with the status of a native exception or a loader failure ({name}): "
           "Go's exec and the launchers built on it print it as the exit status, a report of how it ended "
           "(an abort() exits as a stack buffer overrun): what it printed before it, if anything, says why",
           exception=f"Windows {name}", role="confirmation", kind="signal", anchors=(f"exit status {code}", f"exit code {code}"))
      for code, name in {**_WINDOWS_EXCEPTIONS, **_WINDOWS_LOADER_STATUS}.items()),
    Rule("linker-error",
         _r(r"(?<!\S)(?P<msg>(?:[\w.+-]*/)*ld(?:\.\w+)?: (?:cannot find -l\S+.*|.*?undefined reference to .+))$"),
         "/usr/bin/ld: cannot find -lcurand: No such file or directory",
         "an extension built at run time (DeepSpeed ops, torch cpp_extension) failed to link",
         exception="linker error", role="root", kind="cpp", anchors=("ld: cannot find", "undefined reference to")),
    Rule("named-error-statement",
         _r(r"^(?P<msg>[A-Za-z][\w.+-]{1,30} error: \S.{8,})$"),
         "llama.cpp error: 'error loading model hyperparameters: key not found in model: whisper.context_length'",
         "a program or a library names itself and states its error in lower case with no type or level "
         "(LM Studio's 'llama.cpp error: ...'): weighed as a logged error, below any error the run printed "
         "itself (CUDA's, rocBLAS's and other known forms have rules of their own above)",
         exception="logged error", role="root", kind="log_error", anchors=(" error: ",)),
)

# Error messages some engines log without an exception type, mapped to the type the
# engine raises (taken from the engines' source). Lets a log with only these lines
# still name the exception.
KNOWN_MESSAGES: tuple[Rule, ...] = (
    Rule("torch-cuda-oom",
         _r(r"(?P<msg>CUDA out of memory\. Tried to allocate .*)$"),
         "Server error: CUDA out of memory. Tried to allocate 2.50 GiB",
         "PyTorch's caching allocator raises torch.OutOfMemoryError with this text; servers relay it without the type",
         exception="torch.OutOfMemoryError", role="root", kind="python", anchors=("CUDA out of memory",)),
    Rule("bf16-unsupported",
         _r(r"^(?P<msg>Bfloat16 is only supported on GPUs with compute capability.*)$"),
         "Bfloat16 is only supported on GPUs with compute capability of at least 8.0. Your Tesla T4 GPU has compute capability 7.5.",
         "vLLM's and TensorRT-LLM's dtype check raises ValueError with this text; launchers log it without the type",
         exception="ValueError", role="root", kind="python", anchors=("Bfloat16 is only supported",)),
    Rule("vllm-v0-kv-cache-too-small",
         _r(r"^(?P<msg>The model's max seq len \(\d+\) is larger than the maximum number of tokens that can be stored in KV cache.*)$"),
         "The model's max seq len (29000) is larger than the maximum number of tokens that can be stored in KV cache (23648). Try increasing `gpu_memory_utilization`",
         "vllm/worker/worker.py raise_if_cache_size_invalid raises ValueError with this text",
         exception="ValueError", role="root", kind="python", anchors=("max seq len",)),
    Rule("vllm-ray-driver-without-gpu",
         _r(r"^(?P<msg>Ray does not allocate any GPUs on the driver node.*)$"),
         "Ray does not allocate any GPUs on the driver node. Consider adjusting the Ray placement group",
         "vllm/executor/ray_gpu_executor.py raises ValueError with this text and V0 logs it first",
         exception="ValueError", role="root", kind="python", anchors=("Ray does not allocate",)),
    Rule("ray-infeasible-resource",
         _r(r"(?:^|(?<=Error: )|(?<=Warning: ))(?P<msg>No available node types can fulfill resource request .*)$"),
         "(autoscaler +1m) Error: No available node types can fulfill resource request {'node:10.0.0.5': 0.001, 'GPU': 1.0}. Add suitable node types to this cluster to resolve this issue.",
         "Ray's autoscaler cannot place a task, actor or placement group: no node has the resources it "
         "asks for (a GPU Ray does not see, a node resource of another address); the job waits forever",
         exception="Ray infeasible resource request", role="root", kind="log_error",
         anchors=("No available node types can fulfill",)),
    Rule("python-called-process-error",
         _r(r"(?:^|(?<=\. )|(?<=: ))(?P<msg>Command '.{1,4000}' (?:returned non-zero exit status -?\d+|died with <Signals\.SIG[A-Z]+: \d+>)\.?)$"),
         "Ignore import error when loading sglang.srt.models.qwen2. Command '['/usr/bin/gcc', '/tmp/x/main.c', '-lcuda']' returned non-zero exit status 1.",
         "str() of subprocess.CalledProcessError, which a caller often logs in its own words: a command "
         "it ran failed (a JIT build's compiler, a launcher's child); the command names what",
         exception="subprocess.CalledProcessError", role="root", kind="python",
         anchors=("returned non-zero exit status", "died with <Signals.")),
    Rule("vllm-no-cache-blocks",
         _r(r"^(?P<msg>No available memory for the cache blocks\..*)$"),
         "No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine.",
         "vLLM raises ValueError with this text when profiling leaves no room for the KV cache",
         exception="ValueError", role="root", kind="python", anchors=("No available memory for the cache",)),
)

# CPython's own wording of its built-in exceptions: a line that is nothing but such a message
# (a paste of the message alone, above or without its traceback) names its type, and is no
# other message's next line.
PYTHON_MESSAGES: tuple[Rule, ...] = (
    Rule("ray-placement-group-short",
         _r(r"(?:^|(?<=\] ))(?P<msg>The number of required GPUs exceeds the total number of available GPUs in the placement group\.?)$"),
         "The number of required GPUs exceeds the total number of available GPUs in the placement group.",
         "vLLM on Ray: the cluster has fewer GPUs than the parallel layout needs (raised as ValueError; "
         "later releases log it and wait for the placement group; behind a logger's `file.py:320] ` "
         "that a paste cut)",
         exception="ValueError", role="root", kind="python", anchors=("The number of required GPUs exceeds",)),
    Rule("python-attribute-error",
         _r(r"^(?P<msg>(?:'[\w.]+' object|module '[\w.]+'|type object '[\w.]+') has no attribute '\w+'(?:\. Did you mean: '\w+'\?)?)$"),
         "'LLMEngine' object has no attribute 'model_executor'",
         "CPython raises AttributeError with this text (an API that moved or was removed between versions)",
         exception="AttributeError", role="root", kind="python", anchors=("has no attribute '",)),
    Rule("python-module-not-found",
         _r(r"^(?:\S*python[\d.]*: )?(?P<msg>No module named '?[\w.]+'?)$"),
         "No module named 'vllm._C'",
         "CPython's import system raises ModuleNotFoundError with this text (`python -m x` prints it "
         "behind the interpreter's path, without quotes: '/venv/bin/python: No module named bentoml')",
         exception="ModuleNotFoundError", role="root", kind="python", anchors=("No module named ",)),
    Rule("python-import-name",
         _r(r"^(?P<msg>cannot import name '\w+' from '[\w.]+'(?: \(.*\))?)$"),
         "cannot import name 'Cache' from 'transformers' (/usr/lib/python3/dist-packages/transformers/__init__.py)",
         "CPython raises ImportError with this text when a module lacks the name (a version mismatch)",
         exception="ImportError", role="root", kind="python", anchors=("cannot import name '",)),
    Rule("python-call-type-error",
         _r(r"^(?P<msg>[\w.]+\(\) (?:got an unexpected keyword argument '\w+'|takes \d+ positional arguments? but \d+ (?:were|was) given"
            r"|missing \d+ required (?:positional|keyword-only) arguments?: .+)|'\w+' object is not (?:subscriptable|callable|iterable)"
         r"|argument of type '\w+' is not iterable|object of type '\w+' has no len\(\)|unhashable type: '\w+'"
         r"|unsupported operand type\(s\) for .+: '\w+' and '\w+')$"),
         "__init__() got an unexpected keyword argument 'disable_log_requests'",
         "CPython raises TypeError with this text when a call does not fit the signature (an API that changed)",
         exception="TypeError", role="root", kind="python",
         anchors=("unexpected keyword argument", "positional argument", "required positional", "required keyword", "object is not ",
                  "argument of type '", "has no len()", "unhashable type: '", "unsupported operand type(s)")),
)
KNOWN_MESSAGES += PYTHON_MESSAGES  # the error-line pass tries both

# --------------------------------------------------------------------------------------
# Symptoms: wrappers that report that something else failed. They are set aside when a
# better candidate exists. Matched against "Exception: message" and plain log text.
# --------------------------------------------------------------------------------------
SYMPTOMS: tuple[Rule, ...] = (
    Rule("vllm-engine-core-init", _r(r"Engine core initialization failed"),
         "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}",
         "vLLM V1's API server wraps any engine-core start-up failure in this message",
         anchors=('Engine core initialization failed',)),
    Rule("process-failed-to-start", _r(r"^[\w.-]+(?: [\w.-]+)? failed to start\.?$"),
         "EngineCore failed to start.",
         "a process reports that it (or its child) did not start, without saying why",
         anchors=('failed to start',)),
    Rule("exception-in-where",
         _r(r"^(?:Unhandled |Uncaught )?[Ee]xception (?:in|while|during|occurred in|raised in) (?:ASGI application|callback\b|thread\b|worker\b).*$"
            r"|^(?:Unhandled |Uncaught )?[Ee]xception (?:in|while|during|occurred in|raised in) [^:]{1,200}?:?$|^Error in atexit\._run_exitfuncs:?$"),
         "Exception in Replica(id='352yge88', deployment='VLLMDeployment', app='chat'), the replica will be stopped.",
         "a server's or runtime's catch-all names only where an exception happened (uvicorn, asyncio, "
         "threading, Ray Serve's replica), never what: the traceback below it is the error",
         anchors=("xception in", "xception while", "xception during", "xception occurred", "xception raised", "Error in atexit")),
    Rule("mpi-job-aborted",
         _r(r"Primary job\s+terminated normally, but \d+ process(?:es)? returned|mpirun detected that one or more processes exited with non-zero status"),
         "Primary job  terminated normally, but 1 process returned a non-zero exit code. Per user-direction, the job has been aborted.",
         "mpirun reports that a rank exited with an error and it aborted the job: the rank's own error is the cause",
         anchors=("terminated normally, but", "mpirun detected that one or more processes")),
    Rule("relays-typed-error",
         _r(r"\berror type: <class '[\w.]+'>"),
         "UnpickleableError: [address=0.0.0.0:44522, pid=257] Error cannot be pickled, error type: <class 'ValueError'>, raw error:",
         "a transport (an actor framework's RPC, a process pool) relays an error it could not send as itself: "
         "its type named in words, its text below",
         anchors=("error type: <class",)),
    Rule("worker-returned-error",
         _r(r"^(?:[\w.]+: )?(?:[\w.-]+ ){0,2}(?:worker|process|child|subprocess|rank|actor|executor|proxy)s? (?:\d+ )?(?:returned|reported|raised|hit|encountered|got) (?:an? )?(?:error|exception|failure)\.?$", re.I),
         "RuntimeError: Executor worker returned error",
         "says only that another process (a worker, a child) failed: its own error, logged before, is the cause",
         anchors=("returned error", "returned an error", "reported error", "reported an error", "raised an exception",
                  "hit an exception", "hit an error", "encountered an error", "encountered an exception", "got an error")),
    Rule("see-the-error-log", _r(r"(?:please |Please )?(?:check|see) the (?:error )?log\b"),
         "AssertionError: Engine building failed, please check the error log.",
         "points at errors logged before it", anchors=('the error log', 'check the log', 'see the log')),
    Rule("points-at-another-error",
         _r(r"\b(?:[Ss]ee|[Cc]heck|[Ll]ook up to see) (?:the |its )?(?:inner exception|root cause|stack ?trace|traceback|(?:above|previous) (?:error|exception|traceback)"
            r"|(?:error )?(?:messages?|logs?|output) above)"
            r"|\b(?:error|exception)s? (?:is |are |was |were |has been )?(?:reported|shown|printed|logged) (?:as |in the log )?above\b"),
         "RendezvousConnectionError: The connection to the C10d store has failed. See inner exception for details.",
         "says itself that the cause is another error (its inner exception, the trace above)",
         anchors=("inner exception", "root cause", "stack trace", "stacktrace", "its traceback", "the traceback", "above error", "previous error",
                  "above exception", "previous exception", "above traceback", "previous traceback", "ed as above", "ed above",
                  "message above", "messages above", "log above", "logs above", "output above")),
    Rule("another-rank-failed",
         _r(r"\b(?:caused by|due to|because of) an? (?:exception|error|failure) (?:on|in|of) (?:one of the|another|a remote|other) (?:ranks?|workers?|process(?:es)?|nodes?|peers?)\b"),
         "RuntimeError: Horovod has been shut down. This was caused by an exception on one of the ranks or an attempt to allreduce",
         "a collective framework (Horovod, a distributed runtime) stopped because another rank failed: that rank's error is the cause",
         anchors=("an exception on", "an error on", "an exception in", "an error in", "a failure on", "a failure in")),
    Rule("vllm-workerproc-init", _r(r"WorkerProc initialization failed"),
         "Exception: WorkerProc initialization failed due to an exception in a background process. See stack trace for root cause.",
         "vLLM V1's executor reports that one worker died during start-up",
         anchors=('WorkerProc initialization failed',)),
    Rule("vllm-worker-died", _r(r"[Ww]orker\b[^.]{0,60}?\bdied\b"),
         "RuntimeError: Worker died unexpectedly", "the executor noticed a worker exit: the worker's own error is the cause",
         anchors=('died',)),
    Rule("process-ended-unexpectedly",
         _r(r"\b(?:process|server|worker|child|subprocess|engine|scheduler|replica|runner)\b[^.]{0,60}?\b(?:terminated|exited|crashed|stopped|ended|quit|died) (?:unexpectedly|abnormally)", re.I),
         "Exception: Server process terminated unexpectedly.",
         "a supervisor (an RL framework waiting for its rollout server, a pool) noticed a process end: "
         "that process's own error, printed before, is the cause",
         anchors=("d unexpectedly", "d abnormally", "quit unexpectedly", "quit abnormally")),
    Rule("http-server-error-response",
         _r(r"HTTPException: 5\d\d\b|\bError code: 5\d\d\b|\b5\d\d (?:Internal Server Error|Server Error|Bad Gateway|Service Unavailable|Gateway Timeout)\b|\bInternalServerError\b"),
         "fastapi.exceptions.HTTPException: 500: Error during inference",
         "an HTTP 5xx answer (raised by the server's handler, or received by its client) says that the "
         "server failed, not why: the server's own error, logged beside it, is the cause",
         anchors=("HTTPException: 5", "Error code: 5", "Server Error", "Bad Gateway",
                  "Service Unavailable", "Gateway Timeout", "InternalServerError")),
    Rule("vllm-engine-dead", _r(r"EngineDeadError|EngineCore encountered (?:an issue|a fatal error)|Engine loop has died|MQLLMEngine|engine died unexpectedly|AsyncEngineDeadError"),
         "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace (above) for the root cause.",
         "the API server's view of a dead engine core",
         anchors=('EngineDeadError', 'EngineCore encountered', 'Engine loop has died', 'MQLLMEngine', 'engine died')),
    Rule("vllm-dump-input", _r(r"Dumping (?:input data for V1 LLM engine|scheduler output for model execution|scheduler stats)\b"),
         "Dumping input data for V1 LLM engine (v0.12.0) with config: model='Qwen/Qwen3-8B', ...",
         "vLLM V1's engine core dumps the batch it was running when a step raised (dump_input.py): "
         "the error is the step's traceback, not this record",
         anchors=("Dumping input data", "Dumping scheduler")),
    Rule("vllm-worker-failed-with", _r(r"Worker failed with error|check the stack trace above for the root cause"),
         "RuntimeError: Worker failed with error 'CUDA out of memory', please check the stack trace above for the root cause",
         "vLLM V1's executor re-raises a worker's error under this wrapper",
         anchors=('Worker failed with error', 'check the stack trace above')),
    Rule("vllm-core-proc-failed", _r(r"Failed core proc\(s\)|Engine process failed to start"),
         "Engine process failed to start. See stack trace for the root cause.", "launcher summary",
         anchors=('Failed core proc', 'Engine process failed to start')),
    Rule("vllm-workerproc-hit", _r(r"^WorkerProc hit an exception|^Exception in worker \w+ while processing method"
                                   r"|^Error executing method '?\w+'?\. This might cause deadlock"),
         "WorkerProc hit an exception.", "header logged before the worker's traceback (V0's worker: 'Error "
         "executing method 'load_model'. This might cause deadlock in distributed execution.')",
         anchors=('WorkerProc hit an exception', 'Exception in worker', 'Error executing method')),
    Rule("ray-raylet-died", _r(r"LocalRayletDiedError|local raylet died"),
         "ray.exceptions.LocalRayletDiedError: The task's local raylet died. Check raylet.out for more information.",
         "Ray's node manager died: its own log (raylet.out, a Check failed) says why",
         anchors=('LocalRayletDiedError', 'local raylet died')),
    Rule("ray-actor-died", _r(r"[Aa]ctor died|RayActorError|ActorDiedError|ActorUnavailableError|Unhandled error \(suppress with|RayTaskError\b"),
         "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.",
         "Ray reports a dead actor; the actor's own traceback is the cause",
         anchors=('ctor died', 'RayActorError', 'ActorDiedError', 'ActorUnavailableError', 'Unhandled error', 'RayTaskError')),
    Rule("build-tool-failed",
         # (a CalledProcessError is a non-zero exit: the command names the build tool, however the line ends)
         _r(r"CalledProcessError: Command '\[?'?(?:\S*/)?(?:ninja|make|cmake|gcc|g\+\+|cc|c\+\+|nvcc|clang\+*|ld)\b"
            r"|Command '\[?'?(?:\S*/)?(?:ninja|make|cmake|gcc|g\+\+|cc|c\+\+|nvcc|clang\+*|ld)\b[^\n]*returned non-zero exit status"
            r"|Error building extension '|Error compiling objects for extension"),
         "subprocess.CalledProcessError: Command '['ninja', '-v']' returned non-zero exit status 1.",
         "a build tool (ninja, make, a compiler) failed: its own diagnostics above (nvcc fatal, "
         "file:line: error:) say why",
         anchors=("returned non-zero exit status", "CalledProcessError: Command '", "Error building extension",
                  "Error compiling objects")),
    Rule("torch-child-failed", _r(r"ChildFailedError"),
         "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:",
         "torchrun's summary of failed ranks; the rank's error (or signal) is the cause",
         anchors=('ChildFailedError',)),
    Rule("sglang-scheduler-dead", _r(r"scheduler (?:is dead|died during)|Scheduler hit an exception|Received sigquit from a child process|child process.*(?:died|crashed)"),
         "Rank 0 scheduler is dead. Please check if there are relevant logs.",
         "SGLang's tokenizer manager (or its launcher, 'Rank 0 scheduler died during initialization "
         "(exit code: -3)') notices the scheduler died",
         anchors=('scheduler is dead', 'scheduler died during', 'Scheduler hit an exception', 'Received sigquit', 'child process')),
    Rule("tgi-shard", _r(r"Shard \d+ (?:failed to start|crashed)|ShardCannotStart|Error when initializing model|Method Warmup encountered an error|Shard complete standard error output|WebserverFailed"),
         "Error: ShardCannotStart", "TGI's launcher reports the Python shard's failure (at start, or a crash while serving)",
         anchors=('Shard', 'Error when initializing model', 'Method Warmup', 'WebserverFailed')),
    Rule("llama-cpp-python-load",
         _r(r"Could not load Llama model from path|Failed to load model from file|Failed to create llama_context"),
         "Value error, Could not load Llama model from path: /models/llama-3-70b.Q4_K_M.gguf. Received error Failed to create llama_context",
         "llama-cpp-python's ValueError when llama.cpp's loader failed: the native error printed before it is the cause",
         anchors=('Could not load Llama model', 'Failed to load model from file', 'Failed to create llama_context')),
    Rule("xinference-launch", _r(r"Failed to launch model|launch_builtin_model"),
         "Failed to launch model", "wrapper of an engine failure in xinference",
         anchors=('Failed to launch model', 'launch_builtin_model')),
    Rule("process-pool-broken", _r(r"BrokenProcessPool|A process in the process pool was terminated abruptly"),
         "concurrent.futures.process.BrokenProcessPool: A process in the process pool was terminated abruptly",
         "the pool lost a child; the child's error is the cause",
         anchors=('BrokenProcessPool', 'process pool')),
    Rule("launcher-killing-subprocess", _r(r"\bKilling subprocess \d+|\bSending process \d+ closing signal SIG[A-Z]+"),
         "[2022-05-15 00:12:57,785] [INFO] [launch.py:178:sigkill_handler] Killing subprocess 97277",
         "a launcher (DeepSpeed's, torchrun's elastic agent) stops the other ranks after one "
         "failed: that rank's error is the cause",
         anchors=('Killing subprocess', 'closing signal SIG')),
    Rule("launcher-command-line",
         _r(r"^\['(?:[^']*/)?(?:python[\d.]*|torchrun|deepspeed|accelerate|bash|sh|mpirun)', '"),
         "['/usr/bin/python', '-u', 'train.py', '--local_rank=7']",
         "a launcher names the command line of the child that failed (DeepSpeed adds 'exits "
         "with return code' after it): the child's own error is the cause",
         # (not "['/": engines log lists of paths; the launcher's argv[0] is an interpreter or a launcher)
         anchors=("bin/python", "['python", "torchrun', '", "deepspeed', '", "accelerate', '", "bash', '", "['sh'", "mpirun', '")),
    Rule("subprocess-exit", _r(r"Command .* returned non-zero exit status|died with <Signals"),
         "subprocess.CalledProcessError: Command '['x']' returned non-zero exit status 1.",
         "a launcher reporting that its child failed",
         anchors=('returned non-zero exit status', 'died with <Signals')),
)

# Errors that are consequences of a failure elsewhere (another rank, an earlier kernel).
CASCADES: tuple[Rule, ...] = (
    Rule("nccl-error", _r(r"NCCL error|ncclUnhandledCudaError|ncclSystemError|ncclInternalError|NCCL communicator was aborted"),
         "RuntimeError: NCCL error: unhandled cuda error", "NCCL reports that a peer or the device failed",
         anchors=('NCCL error', 'nccl', 'NCCL communicator')),
    Rule("nccl-watchdog", _r(r"Watchdog caught collective operation timeout|ProcessGroupNCCL.*[Tt]imeout"),
         "[Rank 7] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=199, ...)",
         "a collective timed out because some rank stopped; look for that rank's error",
         anchors=('Watchdog caught', 'ProcessGroupNCCL')),
    Rule("device-assert-triggered", _r(r"device-side assert triggered"),
         "RuntimeError: CUDA error: device-side assert triggered",
         "the assertion line printed by the kernel is the trigger",
         anchors=('device-side assert triggered',)),
    Rule("peer-gone", _r(r"^(?:EOFError|BrokenPipeError|ConnectionResetError|ConnectionRefusedError)\b|Connection reset by peer|Broken pipe"
                         r"|Connection closed by (?:remote )?peer"),
         "BrokenPipeError: [Errno 32] Broken pipe", "another process went away first (NCCL's socket: 'Connection closed by remote peer')",
         anchors=('EOFError', 'BrokenPipeError', 'ConnectionResetError', 'ConnectionRefusedError', 'Connection reset', 'Broken pipe',
                  'Connection closed by')),
    Rule("signal-received", _r(r"received signal SIG"),
         "worker 3 received signal SIGTERM", "the process was told to stop: something else failed first",
         anchors=('received signal',)),
)

# Benign: tracebacks and lines that are not the cause (teardown noise, recovered warnings).
BENIGN: tuple[Rule, ...] = (
    Rule("exception-ignored", _r(r"^Exception ignored in"),
         "Exception ignored in: <function Pool.__del__ at 0x7f>", "interpreter teardown after the crash",
         anchors=('Exception ignored in',)),
    Rule("leaked-semaphore", _r(r"leaked semaphore objects|resource_tracker: There appear to be"),
         "resource_tracker: There appear to be 1 leaked semaphore objects to clean up at shutdown",
         "multiprocessing teardown noise",
         anchors=('leaked semaphore', 'resource_tracker')),
    Rule("destroy-process-group", _r(r"destroy_process_group\(\) was not called|process group has NOT been destroyed"),
         "WARNING: destroy_process_group() was not called before program exit, which can leak resources.",
         "torch.distributed teardown warning",
         anchors=('destroy_process_group', 'process group has NOT been destroyed')),
    Rule("keyboard-interrupt", _r(r"^KeyboardInterrupt\b|^asyncio\.exceptions\.CancelledError|^CancelledError|^SystemExit\b|^GeneratorExit\b"),
         "KeyboardInterrupt", "a shutdown the user or the launcher asked for",
         anchors=('KeyboardInterrupt', 'CancelledError', 'SystemExit', 'GeneratorExit')),
    Rule("plugin-load", _r(r"^Failed to load plugin"),
         "Failed to load plugin lora_filesystem_resolver", "vLLM logs a broken plugin and starts without it",
         anchors=('Failed to load plugin',)),
    Rule("warnings", _r(r"^[\w.]*Warning: "),
         "FutureWarning: `torch.cuda.amp.autocast(args...)` is deprecated.", "Python warnings are not errors",
         anchors=('Warning: ',)),
)

# Never a cause, not even when nothing else was found: a deprecation notice says what
# will break some day, not what broke.
NEVER_CAUSE: tuple[Rule, ...] = (
    Rule("deprecation-warning", _r(r"^(?:[\w.]*\.)?(?:Future|Deprecation|PendingDeprecation)Warning: |^[\w.]*Warning: .*\bdeprecated\b"),
         "FutureWarning: The pynvml package is deprecated. Please install nvidia-ml-py instead.",
         "a deprecation notice", anchors=("Warning: ",)),
)

# Messages only one engine prints: they name the engine when nothing else in the log does
# (one-line excerpts). Wording from the engines' sources.
ENGINE_MESSAGES: tuple[Rule, ...] = (
    Rule("vllm-heads-divisible", _r(r"must be divisible by tensor parallel size"),
         "Total number of attention heads (12) must be divisible by tensor parallel size (8).",
         "vLLM's ModelConfig.verify_with_parallel_config", engine="vllm"),
    Rule("vllm-bf16-capability", _r(r"Bfloat16 is only supported on GPUs with compute capability"),
         "Bfloat16 is only supported on GPUs with compute capability of at least 8.0.",
         "vLLM's dtype check for the GPU", engine="vllm"),
    Rule("vllm-arch-unsupported", _r(r"Model architectures \[.*\] are not supported for now"),
         "Model architectures ['LlamaModel'] are not supported for now.",
         "vLLM's model registry", engine="vllm"),
    Rule("vllm-free-memory", _r(r"on startup is less than desired GPU memory utilization"),
         "Free memory on device (7.34/139.72 GiB) on startup is less than desired GPU memory utilization (0.9, 125.75 GiB).",
         "vLLM's worker start-up memory check", engine="vllm"),
    Rule("sglang-sgl-kernel", _r(r"^RMSNorm failed with error code|sgl_kernel"),
         "RMSNorm failed with error code no kernel image is available for execution on the device",
         "SGLang's sgl-kernel / flashinfer kernels report failures this way", engine="sglang"),
)

# Continuation lines that are boilerplate hints, not part of the message.
MESSAGE_BOILERPLATE: tuple[Rule, ...] = (
    Rule("cuda-async-hint", _r(r"^CUDA kernel errors might be asynchronously reported"),
         "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.",
         "PyTorch appends this to every CUDA error"),
    Rule("cuda-launch-blocking", _r(r"^For debugging consider passing CUDA_LAUNCH_BLOCKING"),
         "For debugging consider passing CUDA_LAUNCH_BLOCKING=1", "PyTorch's CUDA error hint"),
    Rule("cuda-dsa", _r(r"^Compile with `TORCH_USE_CUDA_DSA`"),
         "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.", "PyTorch's CUDA error hint"),
    Rule("cuda-dsa-omitted", _r(r"^Device-side assertions were explicitly omitted for this error check"),
         "Device-side assertions were explicitly omitted for this error check; the error probably arose while initializing the DSA handlers.",
         "PyTorch's CUDA error hint (in place of the TORCH_USE_CUDA_DSA one when the error came before the handlers)"),
    # (its head suffices: an excerpt or a viewer cuts the line inside its address or its
    # last words, "... for more" | "information.")
    Rule("cuda-search-docs", _r(r"^Search for `\w+' in \S*(?: for(?: more(?: information)?)?\.?)?\s*$"),
         "Search for `cudaErrorStreamCaptureUnsupported' in https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html for more information.",
         "PyTorch's CUDA error hint: it names the error the line above stated"),
    Rule("tgi-rank-field", _r(r"^\s*rank=\d+\s*$"), " rank=0", "TGI appends the shard's tracing field"),
    Rule("torch-dynamo-verbose-hint", _r(r"^Set (?:TORCHDYNAMO_VERBOSE=1 for the internal stack trace"
                                         r"|TORCH_LOGS=\S+ and TORCHDYNAMO_VERBOSE=1 for more information)"),
         "Set TORCHDYNAMO_VERBOSE=1 for the internal stack trace (please do this especially if you're reporting a bug to PyTorch).",
         "torch.compile's hint after the error it re-raised: it names how to see more, never the error"),
)

# Markers of the crash phase, in pipeline order; the furthest stage reached before the
# crash wins (stages only move forward during a launch). A line is only searched for a
# marker whose anchors it holds (in any case where the pattern ignores case).
PHASE_MARKERS: tuple[Rule, ...] = (
    # What an engine prints as it starts: a crash after it and before any later stage
    # crashed while starting; a log without it (an excerpt) does not say when.
    Rule("launch", _r(r"Initializing an LLM engine|Initializing a V1 LLM engine|vLLM API server version|non-default args:|server_args=ServerArgs\(|TensorRT-LLM version:|Starting elastic_operator|starting llama server|text_generation_launcher: Args \{|Init torch distributed begin"),
         "INFO 03-13 09:00:01 [api_server.py:912] vLLM API server version 0.8.0", "the engine is starting",
         phase="startup", anchors=("Initializing an LLM engine", "Initializing a V1 LLM engine", "vLLM API server version", "non-default args:", "server_args=ServerArgs(",
                                   "TensorRT-LLM version:", "Starting elastic_operator", "starting llama server",
                                   "text_generation_launcher: Args {", "Init torch distributed begin")),
    # TensorRT's builder compiling an engine (trtllm-build, an ONNX export): nothing has run
    # yet, so a crash here is a start-up crash.
    Rule("engine-build", _r(r"output network tensors|Profiling results in this builder pass|\[GraphReduction\]|Build TensorRT engine"),
         "[05/15/2024-14:02:58] [TRT] [I] Detected 13 inputs and 1 output network tensors.",
         "TensorRT's builder is compiling the engine", phase="startup",
         anchors=("output network tensors", "builder pass", "[GraphReduction]", "Build TensorRT engine")),
    # A launcher saying its engine never came up: whatever crashed, it crashed while
    # starting (the only stage marker that counts though printed after the crash).
    Rule("failed-to-start", _r(r"EngineCore failed to start|Engine core initialization failed|Engine process failed to start|ShardCannotStart|waiting for llama runner to start|Server failed to start"
                               r"|Engine building failed"),
         "ERROR 07-07 15:19:51 [core.py:515] EngineCore failed to start.", "the engine never came up (or, for "
         "TensorRT-LLM, was never built)",
         phase="startup", anchors=("failed to start", "Engine core initialization failed", "ShardCannotStart",
                                   "waiting for llama runner to start", "Server failed to start", "Engine building failed")),
    Rule("weight-loading", _r(r"Loading (?:safetensors |pt |)checkpoint shards|Starting to load model|Loading weights|load_weights|Loading model from|Load weight begin"
                              r"|llm_load_tensors: |llm_load_print_meta: |llm_load_vocab: |llama_model_loader: |llama_model_load: |llama_load_model_from_file: |load_tensors: "),
         "Loading safetensors checkpoint shards:  45% Completed | 29/64", "weights are being read (llama.cpp's loader: llm_load_tensors, llm_load_print_meta, llama_model_loader)",
         phase="weight_loading",
         anchors=("Loading ", "Starting to load model", "load_weights", "Load weight begin", "llm_load_", "llama_model_load",
                  "llama_load_model_from_file: ", "load_tensors: ")),
    Rule("kv-profiling", _r(r"Loading model weights took|Model loading took|Memory profiling takes|Available KV cache memory|# GPU blocks|KV cache is|determine_num_available_blocks|Load weight end|Memory pool end"
                            r"|llama_new_context_with_model: |llama_kv_cache_init: |llama_kv_cache_unified: |llama_context: "),
         "Loading model weights took 14.99 GB", "weights are in; memory profiling follows", phase="kv_cache_profiling",
         anchors=("Loading model weights took", "Model loading took", "Memory profiling takes",
                  "Available KV cache memory", "# GPU blocks", "KV cache is",
                  "determine_num_available_blocks", "Load weight end", "Memory pool end",
                  "llama_new_context_with_model: ", "llama_kv_cache_", "llama_context: ")),
    Rule("graph-capture", _r(r"Capturing (?:CUDA|cudagraphs|cuda graph)|Capture cuda graph (?:begin|end)|capturing CUDA graph", re.I),
         "Capturing CUDA graphs (mixed prefill-decode, PIECEWISE): 45%", "CUDA graph capture", phase="cuda_graph_capture",
         anchors=("captur",)),  # in any case, as the pattern
    Rule("training", _r(r" loss=|'loss': |'grad_norm': "),
         "[2025-03-11 10:41:31,214] [INFO] step 1/1200 loss=2.0431 lr=2.0e-06", "the training loop logs its loss",
         phase="training", anchors=(" loss=", "'loss': ", "'grad_norm': ")),
    Rule("serving", _r(r"Application startup complete|Uvicorn running on|Avg prompt throughput|The server is fired up|Connected|POST /v1/|Prefill batch\.|Decode batch\.|Graph capturing finished|init engine \(profile, create kv cache, warmup model\) took|Starting vLLM API server|Available routes are|chat_completions\{|generate_stream|text_generation_router::infer"),
         "INFO:     Application startup complete.", "the server accepted requests", phase="serving",
         anchors=("Application startup complete", "Uvicorn running on", "Avg prompt throughput",
                  "The server is fired up", "Connected", "POST /v1/", "Prefill batch.", "Decode batch.",
                  "Graph capturing finished", "init engine (profile, create kv cache, warmup model) took",
                  "Starting vLLM API server", "Available routes are", "chat_completions{",
                  "generate_stream", "text_generation_router::infer")),
)

# Phase implied by the function a frame names (root cause frames, nearest the raise first).
# A process's entry frames (multiprocessing's _bootstrap, SGLang's run_scheduler_process)
# are on every stack of that process and name no phase.
FRAME_PHASES: tuple[tuple[LazyPattern, str], ...] = (
    # transformers' AutoConfig resolving a model's type: the config is being read, before
    # any weight, whatever the function is called (from_pretrained). Not any config file's
    # frame: model code reads a config's attributes while it loads weights.
    (_r(r"\bconfiguration_auto\.py$"), "config"),
    (_r(r"capture_model|CudaGraphRunner|init_\w*graphs\b|cuda_graph|_capture_cudagraphs|capture\b|capture_(?:begin|end)\b"), "cuda_graph_capture"),
    (_r(r"profile_run|determine_available_memory|determine_num_available_blocks|_dummy_sampler_run|_initialize_kv_caches|get_kv_cache_config|_check_enough_kv_cache_memory|raise_if_cache_size_invalid|init_memory_pool|profile_max_num_token|warmup"
        r"|initialize_kv_cache|allocate_kv_cache|initialize_from_config"), "kv_cache_profiling"),
    (_r(r"load_model|load_weights|get_model|_load_weights|load_state_dict|from_pretrained|get_filename|get_sharded"), "weight_loading"),
    (_r(r"execute_model|event_loop|step_async|_sample\b|forward_extend|forward_decode|\bgenerate\b|run_batch|forward_batch|generate_token|_run_workers_async|engine_step|process_input_sockets|run_engine_loop|add_request|process_inputs|_validate_model_input|create_chat_completion|create_completion|serving_chat|_process_request|handle_generate_request"), "serving"),
    # (an RL trainer's actor and critic steps are training: verl's compute_log_prob and
    # update_policy, OpenRLHF's ppo_train, a framework's fit loop)
    (_r(r"\bbackward\b|training_step|train_step|_inner_training_loop|\btrain\b|optimizer|run_sft|run_exp"
        r"|compute_(?:ref_)?log_probs?\b|update_(?:policy|actor|critic)\b|compute_values\b|ppo_train\b|_forward_micro_batch\b|\bfit\b"), "training"),
    # (not the executor's own frames, `_init_executor`: its workers load the weights while
    # it waits, so they say nothing of how far the workers got)
    (_r(r"init_device\b|init_worker_distributed_environment|set_device|_lazy_init|initialize_model_parallel|init_distributed_environment|init_torch_distributed"
        r"|initialize_ray_cluster|init_process_group|rendezvous|_create_\w*store\b"), "startup"),
    (_r(r"create_engine_config|__post_init__|_verify_|verify_with_parallel_config|inspect_model_cls|_raise_for_unsupported|resolve_model_cls|registry"), "config"),
)

# Phase implied by the root cause's message.
MESSAGE_PHASES: tuple[tuple[LazyPattern, str], ...] = (
    # "operation not permitted when stream is capturing", cudaErrorStreamCapture*: only a
    # stream that is being captured into a graph raises them
    (_r(r"cuda graph|CUDA graph|stream is capturing|cudaErrorStreamCapture|stream capture", re.I), "cuda_graph_capture"),
    (_r(r"Error in model execution|error in forward(?:Async)? function|failed process requests", re.I), "serving"),
    (_r(r"KV cache|cache blocks|warming up sampler|prefill tokens|max-batch-prefill|mem-fraction|memory pool", re.I), "kv_cache_profiling"),
    (_r(r"divisible by|greater than the derived max_model_len|are not supported for now|Value error|validation error|not supported|unrecognized arguments|invalid choice"
        r"|does not recognize this architecture"), "config"),
    (_r(r"ImportError|ModuleNotFoundError|No module named|cannot import name|Address already in use|socket has failed to (?:listen|bind)|illegal instruction|Free memory on device|Bfloat16 is only supported|no kernel image|re-initialize CUDA|invalid device ordinal|NCCL error|" + NCCL_RESULT.pattern + r"|Cannot allocate memory|Failed to find C compiler|undefined symbol|engine plan file"
        r"|\[c10d\]|[Rr]endezvous|TCPStore|Failed to connect to GCS|client socket has timed out"), "startup"),
    (_r(r"does not exist|safetensors|checkpoint", re.I), "weight_loading"),
)


# --------------------------------------------------------------------------------------
# Pre-filter anchors: literals whose presence makes a line worth parsing. Everything the
# parser reacts to must be reachable from one of these (the context's own literals are
# kb.core.context.CONTEXT_LITERALS, derived from its tables).
# --------------------------------------------------------------------------------------
# Anchors that start a block: the lines after them (frames' code, message continuations,
# the rest of a C++ what()) are parsed too.
BLOCK_ANCHORS: tuple[str, ...] = (
    "Traceback", 'File "', 'File \\"', "Error", "error", "Exception", "terminate called", "what():",
    "uncaught exception",
    "Fatal", "Segmentation fault", "most recent call first",
    "ERROR",  # an error record's message may go on below (wrapped in a column: Prefix.wraps)
    "RIP ",  # a crash report's register dump (Cosmopolitan's): the crash's frames follow it
    "-" * 74,  # Open MPI's help message opens and closes with this ruler: its text states the error
    # a class named by its module's path (`triton.runtime.autotuner.OutOfResources: ...`): its
    # message may go on below, whatever the class is called
    *(f".{capital}" for capital in "ABCDEFGHIJKLMNOPQRSTUVWXYZ"),
) + tuple(a for table in (ERROR_LINES, KNOWN_MESSAGES) for rule in table for a in rule.anchors)  # messages go on
# Phrases a sentence states a failure with, without naming an error (kb.core.tracebacks'
# statements: a paste of the message alone, the line a cut traceback's logger printed
# above it, a device's report that it is about to kill the process): (pattern, literals
# every match of it holds, which the pre-filter looks for).
FAILURE_PHRASES: tuple[tuple[str, tuple[str, ...]], ...] = (
    (r"\b(?:is|are) not supported\b|\bnot supported (?:on|by|for|in)\b", ("not supported",)),
    (r"\b[Ff]ailed to\b", ("failed", "Failed")),
    (r"\bout of memory\b", ("out of memory",)),
    (r"\btimed out\b", ("timed out",)),
    (r"\b(?:does|do) not allow\b|\b(?:is|are) not allowed\b", ("not allow",)),
    (r"\bnot writable\b", ("not writable",)),
    (r"\b(?:was|is) a problem\b", ("a problem",)),
    (r"\b(?:[Ff]atal|[Cc]ritical|[Uu]nrecoverable|[Uu]ncorrectable) error\b",
     ("atal error", "ritical error", "nrecoverable error", "ncorrectable error")),
    (r"\w\)? failed[.!]?$", ("failed",)),  # "... allocation of size 268435456 failed"
)
FAILURE_STATEMENT = _r("|".join(f"(?:{pattern})" for pattern, _ in FAILURE_PHRASES))

# Anchors of single lines.
ERROR_ANCHORS: tuple[str, ...] = (
    "exception", "Killed", "killed", "SIG", "exitcode", "Exit code", "Assertion", "assert",
    "NCCL", "failed", "Failed", "FAILED", "dead", "died", "out of memory", "raise ", "[E]",
    "not supported", "CUDA", "FATAL", "timed out",
) + tuple(literal for _, literals in FAILURE_PHRASES for literal in literals) + (
    # glog's error and fatal levels as PyTorch's C++ side prints them: "[E1203 04:13:52.514000 ...]",
    # older "[E socket.cpp:860]": the level is all such a line may hold of an error
    "[E0", "[E1", "[E ", "[F0", "[F1",
) + tuple(a for rule in SYMPTOMS for a in rule.anchors) + (  # wrappers (a cascade line holds an error anchor)
    # ... and what is named only when nothing else was found (a warning, an interrupt): a
    # long log that holds nothing else must name it as its short excerpt does. Warnings by
    # their category: not the deprecations (NEVER_CAUSE), which long logs are full of
    tuple(a for rule in BENIGN if rule.name != "warnings" for a in rule.anchors)
    + tuple(f"{category}Warning: " for category in ("User", "Runtime", "Import", "Resource", "Syntax", "Bytes", "Unicode")))


# Every redaction rule needs one of these literals on its line (kb.core.redact).
SECRET_ANCHORS: tuple[str, ...] = QUICK_LITERALS
