"""The capture layer: undo what the way a log was collected did to its lines, before any
rule sees them.

Deployments hand logs over through container runtimes (compose `svc-1  | `, docker's
json-file driver, CRI files, `kubectl logs --timestamps`), journald and syslog, schedulers
and launchers (`srun --label`, `mpirun --tag-output`, pdsh `host: `), or a copy from a
terminal that hard-wraps long lines. Each adds its own prefix, in any order and stacked.

Two mechanisms, both learned from the head of the log (so the answer never depends on
how the input was split into chunks):

* `Profile.learn` looks at the first lines as a whole. It finds the *repeated heads*: a
  head shape (digits and letter runs generalized) that starts most lines and that no
  engine logger prints. A shape nobody listed (a new launcher's `node7/3> `) is peeled
  because it repeats, not because it is known. Then the wrap width of a terminal copy
  (lines of exactly the longest length, none longer, whose rest follows), measured on the
  peeled text when the pieces after a cut carry the capture's prefix too (the program's
  lines were cut before the capture), else on the lines as a terminal shows them. The
  joining itself is kb.core.rejoin's.
* `peel` removes, layer by layer, the generic capture atoms (RFC 3339 timestamps, syslog
  headers, `host prog[pid]:`, CRI stream tags, compose gutters, Ray's forwarded-output
  label, srun and MPI tags), the learned heads, and a bracketed name right before an
  engine's record header. A bare timestamp followed by a level word is the engine
  logger's own (TGI) and is left for the engine prefixes.

The peeled fields (host, stream label, capture timestamp) are kept: the stream label
demultiplexes interleaved tasks, the others are context.
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from dataclasses import dataclass, field

from kb.core import lazyre
from kb.core.lazyre import lazy
from kb.core.patterns import (ERROR_LINES, EXCEPTION_LINE, IPYTHON_HEADER, Prefix, by_first_char, known_engine_prefix,
                              starts_record)

_MAX_LAYERS = 6
_REPEATED = 0.6  # share of the head's non-empty lines a learned head must start
_REPEATED_MIN = 3  # and at least this many: one line's `name: ` is no evidence of a label
_NAMED_BY_PROGRAM = 3  # distinct words in a head shape without digits: the program's function names
_MIN_WRAP_WIDTH, _MAX_WRAP_WIDTH = 60, 400

_ANSI = lazyre.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[()][A-Z0-9]|\x1b[=>]")
# The same colour codes with ESC written out as text: rsyslog's `#033[`, `cat -v`'s `^[[`, a
# program's escaped string (`\033[`, `\x1b[`, `\e[`, `\u001b[`). They take columns (a
# terminal showed them), so they are read off the text, not off its width.
_ESCAPED_ANSI = lazyre.compile(r"(?:#033|\^\[|\\033|\\x1[bB]|\\e|\\u001[bB])\[[0-9;]*[A-Za-z]")
ESCAPED_ESC = ("#033[", "^[[", "\\033[", "\\x1b[", "\\x1B[", "\\e[", "\\u001b[", "\\u001B[")
# Colour codes whose invisible ESC byte a paste dropped (GitHub, a web page): `[1;36m(EngineCore
# pid=1)[0;0m ERROR ...`. Read off only on a line that holds a reset code, the one every
# coloured span ends with, so a bracketed text elsewhere is never touched. They take no
# column, as the codes they were: a pasted log was never cut by a terminal, and a line of
# the right length only because of them must not read as cut.
LOST_ESC = lazyre.compile(r"\[\d{1,3}(?:;\d{1,3})*m")
_LOST_RESETS = ("[0m", "[0;0m", "[39m", "[22m")
# A progress bar the next output was glued to (no newline after tqdm's last refresh):
# " 50%|█████     | 4/8 [02:10<02:22, 35.73s/it]Killed"
_GLUED_PROGRESS = lazyre.compile(r"^.*?\d+/\d+ \[[\d:]+<[\d:?]+,\s*[^\]]*\](?=\S)")
# What it needs, found without backtracking: a `]` right after a `<`'s bracket, and no
# space after it. A bar that ends its line (the usual case) is rejected here, ~25x faster.
_GLUE_HINT = lazyre.compile(r"<[^\]]*\]\S")
_LEVEL_WORD = lazy(r" ?(?:TRACE|DEBUG|INFO|WARN|WARNING|ERROR|CRITICAL|FATAL|NOTICE)\b")  # Rust pads it: " WARN"
_RFC3339 = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)"
# journalctl prints the month in the locale's words: "Feb", "mar" (Spanish, Italian), "févr.",
# "Mär", and "2月" (Chinese, Japanese), "2월"; the day, time, host and program[pid] that follow
# say it is a journal line
_MONTH = r"(?:[^\W\d_]{3,5}\.?|1?\d[月월])"
_HOST = r"[A-Za-z0-9][\w.-]{0,62}"
_PROGRAM = r"[\w./@-]{1,64}(?:\[\d+\])?"
_ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"


# Capture prefixes, in the engine prefixes' format (kb.core.patterns.Prefix). Named
# groups: ts, host, stream (a demultiplexing label).
ATOMS: tuple[Prefix, ...] = (
    Prefix("quote", lazy(r"^>(?: |$)"),
         "> [2025-11-06T02:10:00.702Z] KeyError: 'lm_head.weight'",
         "a log quoted in a markdown reply (GitHub, forums): '> ' before every line ('>>>' is a prompt)",
         starts=">"),
    Prefix("bullet", lazy(r"^[*-] (?=\S)"),
         "* E0530 23:11:46.299486 1 logging.cc:43] The engine plan file is not compatible with this version of TensorRT",
         "a log pasted as a markdown list: '* ' or '- ' before every line", starts="*-"),
    Prefix("cri", lazy(rf"^(?P<ts>{_RFC3339}) (?:stdout|stderr) [FP] "),
         "2024-05-01T12:00:00.123456789Z stderr F Traceback (most recent call last):",
         "containerd / CRI-O log files: time, stream, full/partial tag", starts="0123456789"),
    Prefix("syslog-5424", lazy(rf"^<\d{{1,3}}>1 (?P<ts>{_RFC3339}|-) (?P<host>\S+) (?P<app>\S+) (?P<procid>\S+) \S+ (?:-|(?:\[[^\]]*\])+) ?"),
         "<14>1 2024-05-01T12:00:00.123456Z gpu-node-3 vllm 12345 - - ERROR boom",
         "RFC 5424 syslog: PRI, version, time, host, app, procid, msgid, structured data", starts="<"),
    Prefix("syslog-3164", lazy(rf"^(?:<\d{{1,3}}>)?(?P<ts>{_MONTH} [ \d]\d \d\d:\d\d:\d\d) (?P<host>{_HOST}) {_PROGRAM}: "),
         "May 01 12:00:00 gpu-node-3 vllm[12345]: ERROR boom",
         "journalctl's short output and RFC 3164 syslog: time, host, program[pid]"),
    Prefix("rfc3339", lazy(rf"^(?P<ts>{_RFC3339})\s"),
         "2024-05-01T12:00:00.123456789Z Traceback (most recent call last):",
         "kubectl logs --timestamps and log shippers put an RFC 3339 time first", starts="0123456789"),
    Prefix("bracket-time", lazy(r"^\[(?P<ts>\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?)\]\s+(?=\S)(?!\[)"),
         "[2026-01-26T17:25:37Z] (EngineCore_DP0 pid=738) ERROR x",
         "log shippers that prepend an ISO timestamp in brackets", starts="["),
    Prefix("compose", lazy(r"^(?P<stream>[A-Za-z0-9][\w.-]*[-_]\d+|[A-Za-z0-9][\w.-]*(?=\s{2}))\s+\|\s?"),
         "vllm-1  | ERROR 11-18 18:07:28 engine.py:366] x",
         "docker compose prefixes each line with the service name and replica (or the container's "
         "name, padded: 'ollama  | ')", starts=_ALNUM),
    Prefix("compose-gutter", lazy(r"^\s*\|\s?(?=\S)(?!(?:[^|]*\|){2,}\s*$)"),
         "  | (EngineCore_DP0 pid=6804) ValueError: x",
         "docker compose / k8s viewers that leave a bare '| ' gutter (a row of an ASCII table, "
         "'| a | b |', is no gutter: split.py reads its last cell)", starts=" |"),
    Prefix("ray-forward", lazy(r"^\((?P<stream>[^()\s]+(?:\((?:[^()\s]|\([^()\s]*\))*\))*(?: pid=\d+)?, ip=\d{1,3}(?:\.\d{1,3}){3}|raylet|gcs_server|autoscaler(?: \+[\dhms]+)?|dashboard[\w.]*)\) "),
         "(RayWorkerWrapper pid=30507, ip=10.0.0.23) Traceback (most recent call last):",
         "Ray's log monitor forwards a remote actor's output (or a Ray component's: raylet, gcs_server, the "
         "autoscaler's events with their time since start, '(autoscaler +13s)') to the driver; Ray Data "
         "names an actor by the operators it runs: '(MapWorker(MapBatches(vLLMEngineStageUDF)) pid=9, ip=...)'",
         starts="("),
    Prefix("srun-label", lazy(r"^(?P<stream>\d{1,5}): "),
         "3: Traceback (most recent call last):",
         "srun --label: the task id (zero-padded to the width of the largest), even on a one-line excerpt "
         "(indented numbers are a backtrace's frames)", starts="0123456789"),
    Prefix("process-index", lazy(r"^(?P<stream>\[\d{1,4}\]) (?=std(?:err|out): )"),
           "[1] stderr: gguf_init_from_file: invalid magic characters 'PK', expected 'GGUF'",
           "a runner of several commands labels each one's lines with its index (npm's concurrently, "
           "GNU parallel --tag), here before the stream it relays; elsewhere the index is learned as a "
           "repeated head, as torch's own '[5] is setting up NCCL communicator' is no label",
           starts="["),
    Prefix("pdsh-ip", lazy(r"^(?P<stream>(?P<host>\d{1,3}(?:\.\d{1,3}){3})): "),
         "192.168.1.20: RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1191",
         "pdsh (DeepSpeed's multi-node runner) labels each node's lines with its host, often an address "
         "(a host name is learned as a repeated head)", starts="0123456789"),
    Prefix("kernel-time", lazy(r"^\[\s*(?P<ts>\+?\d+\.\d{6}|[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \d{4})\] "),
         "[  +0.000012] amdgpu 0000:03:00.0: amdgpu: [gfxhub] page fault (src_id:0 ring:40 vmid:8 pasid:32781)",
         "the kernel's ring buffer as dmesg prints it: seconds since boot (microseconds), the time since the "
         "last message (-H), or the wall time (-T)", starts="["),
    Prefix("mpi-tag", lazy(r"^\[(?P<stream>\d+,\d+)\]<(?:stdout|stderr|stddiag)>:"),
         "[1,3]<stderr>:Traceback (most recent call last):",
         "Open MPI's --tag-output: [jobid,rank]<stream>: and the output right after it", starts="["),
    Prefix("buildkit", lazy(r"^#(?P<stream>\d{1,4}) \d{1,6}\.\d{2,3} "),
         "#12 31.552 nvcc error   : 'cicc' died due to signal 9 (Kill signal)",
         "docker build's plain progress (BuildKit, as CI logs show it): the build step's number and "
         "the seconds since the step began", starts="#"),
)

_BY_FIRST, _ANY_START = by_first_char(ATOMS)


@dataclass(slots=True)
class Peeled:
    text: str
    dropped: str = ""  # what clean_parts cut from the head: a glued or overwritten progress bar
    stream: str | None = None
    host: str | None = None
    timestamp: str | None = None
    layers: tuple[str, ...] = ()


@dataclass
class Profile:
    """What the head of a log says about its capture: the wrap width of a terminal copy
    and the learned repeated heads (compiled patterns). Empty for an ordinary log."""

    wrap_width: int | None = None
    captured: bool = False  # some line of the head carried a capture prefix
    # the program's own lines were wrapped before the capture prefixed each piece
    # (rich inside a container, a wrapped paste re-captured): the width of the peeled text
    inner_wrap_width: int | None = None
    heads: list[object] = field(default_factory=list)
    head_names: list[str] = field(default_factory=list)
    # the program wrapped its records at word boundaries to this width before the capture
    # prefixed each piece (rich or loguru's console inside a container)
    word_wrap_width: int | None = None
    # the whitespace every line of the head opens with (see _common_indent)
    indent: str = ""

    @classmethod
    def learn(cls, lines: list[str]) -> Profile:
        profile = cls()
        bodies = profile._learn_prefixes(lines)
        profile.captured = any(body.layers for body in bodies)
        if profile.captured:
            inner = _wrap_width([body.text for body in bodies])
            if inner and _prefixed_continuations(bodies, inner):
                profile.inner_wrap_width = inner
                return profile
        profile.wrap_width = _wrap_width([shown(line) for line in lines], profile)
        if profile.wrap_width:  # the terminal cut the captured lines: learn on whole ones
            profile.heads, profile.head_names, profile.indent = [], [], ""
            bodies = profile._learn_prefixes(list(rejoin(lines, profile.wrap_width)))
        if profile.captured:
            profile.word_wrap_width = _word_wrap_width(bodies)
        return profile

    def describe(self) -> list[str]:
        out = [f"hard-wrapped at {self.wrap_width} columns"] if self.wrap_width else []
        if self.inner_wrap_width:
            out.append(f"hard-wrapped at {self.inner_wrap_width} columns inside the capture")
        if self.word_wrap_width:
            out.append(f"word-wrapped at {self.word_wrap_width} columns inside the capture")
        return out + [f"repeated head {name}" for name in self.head_names]

    def _learn_prefixes(self, lines: list[str]) -> list[Peeled]:
        """The repeated heads, and the indent behind them (see _common_indent); returns the
        lines peeled by what was learned."""
        self._learn_heads(lines)
        bodies = [peel(line, self) for line in lines]
        # outside the capture's prefixes, or inside them (a line a carriage return overwrote
        # shows only its last redraw, without the indent)
        self.indent = _common_indent(lines) or _common_indent([body.text for body in bodies if not body.dropped])
        if self.indent:  # heads the indent hid (an indented paste of `host: ...` lines)
            self._learn_heads(lines)
            bodies = [peel(line, self) for line in lines]
        return bodies

    def _learn_heads(self, lines: list[str]) -> None:
        """A head shape is learned when it starts most non-empty lines after the known
        atoms are peeled, and is not an engine logger's prefix (which the engine
        prefixes read, fields and all)."""
        for _ in range(2):  # two unknown layers at most (`host: 3: ...`)
            bodies = [peel(line, self).text for line in lines]
            bodies = [b for b in bodies if b.strip()]
            if not bodies:
                return
            shapes = Counter(shape for body in bodies if (shape := _head_shape(body)) is not None)
            if not shapes:
                return
            shape, count = shapes.most_common(1)[0]
            if count < max(_REPEATED_MIN, _REPEATED * len(bodies)):
                return
            pattern = lazy("^" + shape)
            if sum(1 for b in bodies if known_engine_prefix(b)) >= count:
                return  # the engine's own prefix: leave it to the engine prefixes
            if r"\d" not in shape and len({m.group(0) for b in bodies if (m := pattern.match(b))}) >= _NAMED_BY_PROGRAM:
                # a capture labels lines with a few names (hosts, containers, ranks); many words
                # in one shape are the program's own (llama.cpp's `load_tensors: `, `llama_context: `)
                return
            self.heads.append(pattern)
            self.head_names.append(shape)


def _common_indent(lines: list[str]) -> str:
    """The whitespace that every non-blank line of the head opens with (behind the capture
    prefixes already known): a log pasted as a markdown code block (four spaces) or
    indented in a ticket or a mail, then perhaps captured again. Peeled as a capture
    layer, it leaves the log's own indentation (a traceback's frames under its header)
    as the program printed it."""
    indents = [line[:len(line) - len(line.lstrip(" \t"))] for line in lines if line.strip()]
    return os.path.commonprefix(indents) if indents else ""


# A head: a short run without spaces (or with one, for `host 3:`) ending in a separator
# that launchers put after their label: ': ', '| ' (padded: '  | '), '> ', ']: '; or a
# process index in brackets (`[1] `: npm's concurrently, GNU parallel --tag).
_HEAD = lazyre.compile(r"^([A-Za-z0-9][\w.,/@-]{0,40}(?:[>\]])?|\[\d{1,4}\])(: | *\| |> |:(?=\[)|\]: |(?<=\]) )")


def _head_shape(body: str) -> str | None:
    match = _HEAD.match(body)
    if match is None:
        return None
    label, sep = match.group(1), match.group(2)
    if label.isalpha() and label[:1].isupper() and sep == ": ":
        return None  # `ValueError: ...`, `Traceback: ...`: a message, not a label
    if "Error" in label or "Exception" in label or "Warning" in label:
        return None
    shape = re.sub(r"\d+", r"\\d+", re.sub(r"[A-Za-z]+", "[A-Za-z]+", re.escape(label)))
    # a '|' gutter is padded to the longest label (docker compose's `ollama  | `)
    return f"(?P<stream>{shape}){' *' + re.escape(sep.lstrip()) if '|' in sep else re.escape(sep)}"


_DIGITS = lazyre.compile(r"0x[0-9a-fA-F]+|\d+")  # a number, an address among them


def same_head(line: str, following: str) -> bool:
    """Does `following` start the way `line` does (`[80746] [rank0]:[E321 ...` then
    `[80747] [rank4]:[E321 ...`, numbers and addresses aside)? Then it is the next record of the same
    writer, not the rest of a cut line: a cut falls anywhere, mid-word."""
    head = _DIGITS.sub("0", line[:64])[:12]
    if len(head) == 12 and not head.isalnum() and _DIGITS.sub("0", following[:64])[:12] == head:
        return True
    # a short label both lines open with (`[rank5]: ` before lines indented unalike)
    return bool(_LABEL_HEAD.match(os.path.commonprefix([_DIGITS.sub("0", line[:24]), _DIGITS.sub("0", following[:24])])))


_LABEL_HEAD = lazyre.compile(r"^[\[(<][^\s\])>]{2,20}[\])>]:?\s")


def _prefixed_continuations(bodies: list[Peeled], width: int) -> bool:
    """Was the program's output wrapped before its capture prefixed each line? Then the
    piece after a cut carries the same capture layers as the cut one."""
    cut = [i for i, body in enumerate(bodies[:-1]) if continues(body.text, width)]
    same = sum(1 for i in cut if bodies[i + 1].layers == bodies[i].layers and bodies[i].layers)
    return bool(cut) and same * 2 > len(cut)


_MIN_WORD_WRAPS = 3


def _word_wrap_width(bodies: list[Peeled]) -> int | None:
    """A console that wraps at word boundaries to W columns (rich, loguru inside a
    container) leaves a record's head line followed, in the same stream, by pieces with
    no head of their own, where the next piece's first word would not have fit on the
    line before (its length + a space + the word > W, W the longest line). Such breaks,
    several and nearly all of them, say the records were wrapped; a headless line that
    would have fit is a line the program printed."""
    texts = [body.text.rstrip() for body in bodies if body.layers]
    width = max((len(text) for text in texts), default=0)
    if len(texts) < 4 or not _MIN_WRAP_WIDTH <= width <= _MAX_WRAP_WIDTH:
        return None
    wrapped = fitted = 0
    for held, body in zip(bodies, bodies[1:]):
        following = body.text.strip()
        if (not held.layers or held.layers != body.layers or held.stream != body.stream or not following
                or body.text[:2] == "  "  # a column layout (rich's logging handler): its own reading
                or not starts_record(held.text) or starts_record(body.text) or same_head(held.text, body.text)):
            continue
        if word_wrapped(held.text, following, width):
            wrapped += 1
        else:
            fitted += 1
    return width if wrapped >= _MIN_WORD_WRAPS and wrapped >= 4 * fitted else None


def word_wrapped(held: str, following: str, width: int) -> bool:
    """Does `following` go on the line `held` when records are word-wrapped at `width`?
    Its first word would not have fit there (a word longer than the width was cut
    inside: the held piece fills the width)."""
    following = following.strip()
    held = held.rstrip()
    return bool(following) and (len(held) >= width or len(held) + 1 + len(following.split()[0]) > width)


def _wrap_width(lines: list[str], profile: Profile | None = None) -> int | None:
    """A terminal copy cuts every longer line at the same width W: several lines of exactly
    W characters (not padding, not table borders; different ones, or one record repeated
    with other rests after it), none longer, and after some of them a shorter line, the
    rest of the cut one, not a new record (lines of one length that each hold a record are
    a run of alike records)."""
    texts = [line.rstrip("\r") for line in lines]
    lengths = [len(text) for text in texts]
    if len(lengths) < 2:
        return None
    width = max(lengths)
    if not _MIN_WRAP_WIDTH <= width <= _MAX_WRAP_WIDTH:
        return None
    # a line that holds a whole JSON record (docker's json-file) was not cut
    cut = [i for i, text in enumerate(texts) if lengths[i] == width and _cut_inside(text)
           and not {"docker-json", "json-record"} & set(peel(text, profile).layers)]
    followed = [i for i in cut if i + 1 < len(texts)]
    new_record = [_starts_new_record(texts[i], texts[i + 1], profile) for i in followed]
    tails = sum(1 for i, new in zip(followed, new_record) if not new and 0 < _after_run(lengths, i, width) < width)
    # a line exactly k widths long ends in a full piece: its run reaches the end of the
    # excerpt (or a blank line), and the cuts fall inside words
    exact = sum(1 for i, new in zip(followed, new_record)
                if not new and _after_run(lengths, i, width) == 0 and cuts_a_word(texts[i], texts[i + 1]))
    records = sum(new_record)
    distinct = len({texts[i] for i in cut})
    rests = len({texts[i + 1] for i, new in zip(followed, new_record) if not new})
    if width in _TERMINAL_WIDTHS:  # a usual terminal width: less evidence will do
        if len(cut) >= 2 and (tails >= 1 or exact >= 2) and records * 2 <= len(followed) and len(cut) >= 0.02 * len(lengths):
            return width
        if (len(cut) == 1 and tails == 1 and not records
                and (_goes_on(texts[cut[0] + 1], profile) or _word_rest(texts[cut[0]], texts[cut[0] + 1], profile))
                and not _sentence_break(texts[cut[0]], texts[cut[0] + 1])):
            return width  # a short excerpt with one cut
        return None
    # any other width: two lines may share a length by chance, several rests may not; one
    # line and the same next one over and over is a loop (a service restarting), not a cut
    # (one record repeated whole, a sentence each time, is a repeated record: not a cut one)
    repeated_sentence = distinct == 1 and texts[cut[0]].rstrip().endswith((".", "!", "?")) if cut else False
    if (len(cut) >= 2 and (distinct >= 2 or rests >= 2 and not repeated_sentence) and tails >= 2
            and records * 3 <= len(followed) and len(cut) >= 0.02 * len(lengths)):
        return width
    return None


_FRAME_LINE = lazyre.compile(r'File "[^"]+", line \d+, in (?:[A-Za-z_]\w*|<\w+>)$')


def _whole_frame_line(line: str, following: str) -> bool:
    """A Python frame line, whole (`File "...", line 1511, in _wrapped_call_impl`), before
    a line that is not the rest of a function's name: the frame's code line, its own record
    (a paste that lost the code's indent has nothing else to tell it apart)."""
    return bool(_FRAME_LINE.search(line)) and not following.strip().isidentifier()


def _starts_new_record(line: str, following: str, profile: Profile | None) -> bool:
    """Is `following` a record of its own rather than the rest of `line` cut at the width?
    It starts like a record, or like `line` does, or both carry the capture's prefix
    (`0: `, `vllm-1  | `: a terminal's cut carries none), or `line` is a whole frame line."""
    peeled = peel(following, profile)
    if starts_record(peeled.text, specific=cuts_a_word(line, following)) or same_head(line, following):
        return True
    layers = peel(line, profile).layers
    return bool(layers) and peeled.layers == layers or _whole_frame_line(line, following)


def cuts_a_word(held: str, text: str) -> bool:
    """The cut fell inside a word ("... exit type: SYSTEM_" | "ERROR Worker exit ..."): then
    a bare level word at the head of the next piece is that word's rest, not a record's
    header (a header still starts a record when it says more: a date, a source)."""
    return bool(held) and bool(text) and (held[-1].isalnum() or held[-1] == "_") and text[0].isalnum()


def _sentence_break(held: str, text: str) -> bool:
    """A line that ends a word and a next one that starts a capitalized one ("... used to
    compile" | "PyTorch (11.8). ..."): a newline the program printed, as likely as a cut;
    one such line is no evidence of a terminal's width. So is a line that ends a sentence
    ("... out-of-memory handler." | "srun: error: ...")."""
    return ((held[-2:].isalpha() and held[-2:].islower() and text[:2].isalpha() and text[0].isupper())
            or (held[-1:] in (".", "!", "?") and held[-2:-1].isalnum() and text[:1].isalpha()))


def _after_run(lengths: list[int], i: int, width: int) -> int:
    """Length of the first line after the run of full-width lines from line i (0: none):
    a line cut several times ends in one shorter piece."""
    j = i + 1
    while j < len(lengths) and lengths[j] == width:
        j += 1
    return lengths[j] if j < len(lengths) else 0


# Terminal widths people copy from (the default 80 and the common larger windows).
_TERMINAL_WIDTHS = frozenset({80, 100, 120, 132, 140, 150, 160, 180, 200, 220, 240})
_STRUCTURE = ("Traceback (", 'File "', "During handling", "The above exception")


def _goes_on(text: str, profile: Profile | None) -> bool:
    """Could this line be the rest of a line the terminal cut? Not if it starts something
    of its own or is indented, nor if the capture prefixed it (the terminal cut the
    captured line)."""
    if not text or peel(text, profile).layers:
        return False
    if text[0].isspace() and not (text[0] == " " and text[1:2].strip()):
        return False  # indented (a cut on a space leaves one space at the rest's head)
    return not text.startswith(_STRUCTURE) and not EXCEPTION_LINE.match(text) and not _states_error(text)


def _word_rest(held: str, text: str, profile: Profile | None) -> bool:
    """A rest that begins inside the word the cut split ("...distributed/cust" |
    "om_all_reduce.cuh:37: CUDA error: ..."), in lower case and unprefixed: the word's
    rest, even where what follows it reads as an error of its own."""
    return (cuts_a_word(held, text) and held[-1:].islower() and text[:1].islower()
            and not peel(text, profile).layers)


def _states_error(text: str) -> bool:
    """An error line of a known format from the line's start (`Aborted (core dumped)`).
    kb.core.tracebacks has a twin for message continuations, which leaves out the rules
    for a Python exception's own lines (pydantic's `Value error, ...` continues one)."""
    for rule in ERROR_LINES:
        if rule.role in ("root", "confirmation") and any(a in text for a in rule.anchors):
            match = rule.pattern.search(text)
            if match is not None and match.start() <= 16:
                return True
    return False


_BORDERS = "|+-=─│┃║╗╝┐┘╮╯┤┨╢╣"  # a drawn box's right edge (rich's panels round their corners)
_RULE_CHARS = "-=─"  # a rule line's: a border only as a run ("main-dora-" is a word cut)


def _ends_with_border(text: str) -> bool:
    last = text[-1:]
    if last in _RULE_CHARS:
        return len(text) >= 3 and text[-3:] == last * 3
    return bool(last) and last in _BORDERS


def _cut_inside(text: str) -> bool:
    """A line that surely ends where a wrap cut it: not padded or boxed to the width, nor
    right-aligned to it (rich's `   local_server.py:108` source column)."""
    body = text[:-1] if text.endswith(" ") else text  # a cut may fall on one space, not on padding
    last = body[-1:]
    return bool(last) and not last.isspace() and not _ends_with_border(body) and not _RIGHT_ALIGNED.search(body)


_RIGHT_ALIGNED = lazyre.compile(r"\S {3,}\S+$")


def continues(text: str, width: int) -> bool:
    """In a copy wrapped at `width`, does this line go on on the next one? A cut may fall
    on a space; a table border ends its own line. Width as the terminal shows the line
    (colour codes take no column)."""
    if "\x1b" in text or "\r" in text or _lost_esc(text):
        text = shown(text)
    return len(text) == width and not _ends_with_border(text)


def rejoin(lines, width: int):
    """Lines of exactly `width` characters continue on the next line: join them."""
    pending = ""
    for line in lines:
        text = line.rstrip("\r")
        if continues(text, width):
            pending += text
            continue
        yield pending + line
        pending = ""
    if pending:
        yield pending


# A copy that lost its line breaks but kept each line's padding to the console's width:
# the next line begins after a long run of spaces. Only a run before what starts a line
# of a crash (a frame, keeping its indent, a traceback's header, an exception line) is
# such a break: right-aligned columns (rich's source) and tables stay one line.
_GLUED_LINE = lazyre.compile(r"(?<=\S) {14,}(?=  File \")|(?<=\S) {16,}(?=Traceback \(most recent call last\)|"
                         r"(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception): )")
_PADDING = " " * 14
# ... or before a logger's record: its header says a line began there
_PADDING_RUN = lazyre.compile(r"(?<=\S) {16,}(?=\S)")


def _glued_lines(text: str) -> list[str]:
    """The lines of a padded copy (see _GLUED_LINE): cut at each long run of spaces before
    what starts a line of a crash or a logger's record."""
    cuts = [run for run in _PADDING_RUN.finditer(text) if starts_record(text[run.end():], specific=True)]
    lines, start = [], 0
    for run in cuts:
        lines += _padded_pieces(text[start:run.start()])
        start = run.end()
    return lines + _padded_pieces(text[start:])


def _padded_pieces(text: str) -> list[str]:
    """`text` cut at each run of _GLUED_LINE that pads a line to a console's width (the run
    ends at least _MIN_WRAP_WIDTH columns after the last cut): a short marker aligned with
    the text after it (pytest's `E                   RuntimeError: ...`) is one line."""
    pieces, start = [], 0
    for run in _GLUED_LINE.finditer(text):
        if run.end() - start >= _MIN_WRAP_WIDTH:
            pieces.append(text[start:run.start()])
            start = run.end()
    return [*pieces, text[start:]]


# A label-prefixed stream (`srun --label`'s "10: ") pasted with its line breaks turned
# into spaces: the same label recurs inside one line, at each former line's head.
_INLINE_LABEL = lazyre.compile(r" (\d{1,5}): (?=\S)")
_INLINE_LABELS = 3  # recurrences of one label that show it was a line prefix
# ... and a logger's record heads in one line: vLLM's "ERROR 11-04 18:02:56 [file.py:597] ",
# NCCL's "host:pid:tid [1] NCCL INFO ": each began a line before the paste joined them
_INLINE_RECORD = lazyre.compile(r" (?=(?:\([^()]{0,80}pid=\d+[^()]{0,200}\) )?(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? \[[\w./-]+:\d+\] "
                            r"|[\w.-]+:\d+:\d+ \[\d+\] NCCL (?:INFO|WARN|TRACE) )")


# A traceback whose line breaks a viewer turned into spaces (a web console's copy): its
# header, then each frame `File "x", line N, in f` and its code, then the exception line.
_FLAT_HEADER = "Traceback (most recent call last): "
_FLAT_FRAME = lazyre.compile(r' (?=File "[^"]+", line \d+, in )')
_FLAT_FRAME_HEAD = lazyre.compile(r'File "[^"]+", line \d+, in (?:[A-Za-z_]\w*|<\w+>)')
_CHAIN_MARKERS = ("During handling of the above exception, another exception occurred:",
                  "The above exception was the direct cause of the following exception:")
_FLAT_CHAIN = lazyre.compile(" (?=" + "|".join(re.escape(marker + " ") for marker in _CHAIN_MARKERS) + ")")
_TRAILING_CARETS = lazyre.compile(r"\s+[\^~]{3,}$")  # Python 3.11's markers under the code, glued on
_FLAT_EXCEPTION = lazyre.compile(r" (?=(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception|Exit|Interrupt|Failure|Fault)(?:: |$))")


def _unflattened(text: str) -> list[str]:
    """The lines of a traceback flattened onto one line (see _FLAT_HEADER), or of its frames
    alone (an excerpt that begins at a frame)."""
    if _FLAT_HEADER in text:
        before, _, rest = text.partition(_FLAT_HEADER)
        lines = [before] if before.strip() else []
        lines.append(_FLAT_HEADER.rstrip())
    else:
        lines, rest = [], text
    for block in _FLAT_CHAIN.split(rest):
        for marker in _CHAIN_MARKERS:
            if block.startswith(marker):
                lines.append(marker)
                block = block[len(marker):].lstrip()
                if block.startswith(_FLAT_HEADER):
                    lines.append(_FLAT_HEADER.rstrip())
                    block = block[len(_FLAT_HEADER):]
        for part in _FLAT_FRAME.split(block):
            head = _FLAT_FRAME_HEAD.match(part)
            if head is None:
                lines.append(part)
                continue
            lines.append("  " + head.group(0))
            code = _TRAILING_CARETS.sub("", part[head.end():].strip())
            exception = list(_FLAT_EXCEPTION.finditer(" " + code))
            if exception:  # the last frame's code, then the exception it raised
                cut = exception[-1].start()
                code, raised = code[:cut].strip(), code[cut:].strip()
                lines.extend(["    " + code] if code else [])
                lines.append(raised)
            elif code:
                lines.append("    " + code)
    return lines


def unglued(text: str) -> list[str]:
    """The lines a padded copy glued into `text` (see _GLUED_LINE), a paste that joined
    a labeled stream's lines or a logger's records with spaces (see _INLINE_LABEL,
    _INLINE_RECORD), or a flattened traceback (see _FLAT_HEADER), else [text]."""
    if text.count(": ") >= _INLINE_LABELS:
        labels = _INLINE_LABEL.findall(text)
        if len(labels) >= _INLINE_LABELS:
            label = max(set(labels), key=labels.count)
            if labels.count(label) >= _INLINE_LABELS:
                return [part for part in text.split(f" {label}: ") if part.strip()]
    if len(text) > 200 and text.count(" [") >= _INLINE_LABELS or text.startswith('File "') and " [" in text:
        heads = _INLINE_RECORD.split(text)
        # several records, or one after a frame's head: a function's name has no spaces,
        # so what follows `in f` is the next line the paste joined on
        if len(heads) > _INLINE_LABELS or len(heads) > 1 and _FLAT_FRAME_HEAD.fullmatch(heads[0]):
            return [line for part in heads if part.strip() for line in unglued(part)]
    if _PADDING in text and not IPYTHON_HEADER.match(text):
        lines = _glued_lines(text)
        if len(lines) > 1:
            return [line for part in lines for line in (_unflattened(part) if _flat(part) else [part])]
    if _flat(text):
        return _unflattened(text)
    return [text]


def _flat(text: str) -> bool:
    return ((_FLAT_HEADER in text or text.startswith('File "') and _FLAT_FRAME_HEAD.match(text) is not None)
            and _FLAT_FRAME.search(text) is not None)


def shown(raw: str) -> str:
    """What a terminal shows of a line: no ANSI codes, only what the last carriage return
    left. The width a terminal wraps at is counted on this."""
    return _shown(raw)[0]


def _shown(raw: str) -> tuple[str, str]:
    """(what a terminal shows, the last text a carriage return overwrote)."""
    if "\x1b" in raw:
        raw = _ANSI.sub("", raw)
    if _lost_esc(raw):
        raw = LOST_ESC.sub("", raw)
    if "\r" in raw:
        raw = raw.rstrip("\r")
        if "\r" in raw:
            parts = [p for p in raw.split("\r") if p.strip()]
            return (parts[-1], parts[-2]) if len(parts) > 1 else (parts[-1] if parts else "", "")
    return raw, ""


def _lost_esc(raw: str) -> bool:
    """Colour codes without their ESC byte on the line (an ESC written out as text,
    `#033[0m`, is clean_parts' to read off)."""
    return ("m" in raw and any(reset in raw for reset in _LOST_RESETS)
            and not any(escaped in raw for escaped in ESCAPED_ESC))


def clean(raw: str) -> str:
    """The line as shown (see `shown`), without a markdown paste's backticks or a progress
    bar another writer glued to its head."""
    return clean_parts(raw)[0]


def clean_parts(raw: str) -> tuple[str, str]:
    """(`clean(raw)`, what it dropped from the line's head: the progress bar another
    writer glued to it or a carriage return overwrote). The bar is not the line's
    message, but it says how far the launch had got when the line was printed."""
    raw, dropped = _shown(raw)
    if "[" in raw and any(escaped in raw for escaped in ESCAPED_ESC):
        raw = _ESCAPED_ANSI.sub("", raw)
    raw = _unticked(raw)
    if raw.endswith("]") and "across cluster]" in raw:
        raw = _RAY_DEDUP.sub("", raw)
    if "/" in raw and "<" in raw and _GLUE_HINT.search(raw):
        glued = _GLUED_PROGRESS.match(raw)
        if glued is not None:
            dropped, raw = raw[:glued.end()], raw[glued.end():]
    return raw, dropped


# Ray's log deduplication ends a line its actors printed alike with how often they did: the
# count is Ray's, not the program's words
_RAY_DEDUP = lazyre.compile(r"\s*\[repeated \d+x across cluster\]$")


def _unticked(text: str) -> str:
    """A line pasted as markdown code (`RuntimeError: ...`, a fence of its own) without
    its backticks; not one that only opens with an inline code span ("`fa2F@v2.5.7-pt`
    is not supported because:")."""
    if text[:1] == "`" and "`" not in text.lstrip("`").rstrip().rstrip("`"):
        return text.lstrip("`")
    return text


# A bracketed name a wrapper puts before each record of the engine it runs (a pipeline's
# `[Stage-0] `, a supervisor's `[prefill] `): a label because an engine's record header
# follows it, whatever the name.
_BRACKET_LABEL = lazyre.compile(r"\[(?P<stream>[A-Za-z][\w.:/@ -]{0,40})\] ")


def peel(raw: str, profile: Profile | None = None) -> Peeled:
    """The line as the program printed it, and what the capture said about it."""
    out = Peeled(*clean_parts(raw))
    if out.text.startswith('{"'):
        _docker_json(out)
    heads = profile.heads if profile is not None else ()
    for _ in range(_MAX_LAYERS):
        text = out.text
        if profile is not None and profile.indent and text.startswith(profile.indent) and "indent" not in out.layers:
            out.text, out.layers = text[len(profile.indent):], out.layers + ("indent",)
            continue
        if text[:1] == "[" and (lost := LOST_ESC.match(text)) and text[lost.end():lost.end() + 1] not in ("", " ", "]"):
            # a colour code that lost its ESC (and its reset) at the head, outside the
            # capture's prefixes or behind them: `[33m(raylet) A worker died ...`
            out.text = text[lost.end():]
            continue
        atom_match = None
        for atom in _BY_FIRST.get(text[:1], _ANY_START):
            match = atom.pattern.match(text)
            if match is not None and match.end() > 0:
                if (atom.name == "rfc3339" and _LEVEL_WORD.match(text, match.end())
                        and not known_engine_prefix(text[match.end():], specific=True)):
                    continue  # the engine logger's own timestamp and level (TGI)
                atom_match = (atom.name, match)
                break
        if atom_match is None:
            for index, head in enumerate(heads):
                match = head.match(text)
                if match is not None:
                    atom_match = (f"head:{profile.head_names[index]}", match)
                    break
        if atom_match is None and text[:1] == "[":
            match = _BRACKET_LABEL.match(text)
            if (match is not None and starts_record(text[match.end():], specific=True)
                    and not known_engine_prefix(text)):
                atom_match = ("bracket-label", match)
        if atom_match is None:
            if text.startswith('{"') and "json-record" not in out.layers:
                _json_record(out)  # a program's JSON record behind the capture's prefix
            elif _QUOTED_LINE.match(text):
                out.text, out.layers = text.strip()[1:-1], out.layers + ("quoted-line",)
            elif text[:2] == "..":
                _glued_dots(out)
            elif text[:2] == "**" and _BOLD_LINE.match(text):
                # a line a reporter set in bold to point at it: **RuntimeError: Broken pipe**,
                # capture prefix and all (`**vllm-1  | ERROR ...**`): peeled inside the bold
                out.text = text[2:text.rstrip().rindex("**")]
                continue
            elif text[:1] == "`" and out.layers:
                out.text = _unticked(text)  # behind a capture's prefix as without it
            return out
        name, match = atom_match
        groups = match.groupdict()
        if groups.get("ts") and out.timestamp is None and groups["ts"] != "-":
            out.timestamp = groups["ts"]
        if groups.get("host") and out.host is None:
            out.host = groups["host"]
        if groups.get("stream") and out.stream is None:
            out.stream = groups["stream"]
        out.layers += (name,)
        out.text = text[match.end():]
    return out


def _glued_dots(out: Peeled) -> None:
    """Progress dots a program printed without a newline (a kernel compile, a wait loop),
    then the next record on the same line: "..[ERROR] the socversion ...". The dots are
    dropped like a glued progress bar."""
    dots = len(out.text) - len(out.text.lstrip("."))
    if known_engine_prefix(out.text[dots:]):
        out.dropped, out.text = out.dropped or out.text[:dots], out.text[dots:]


# A line a reporter pasted in double quotes, whole ("CUDA error 209 at ...: no kernel
# image ..."): a sentence inside, no quote of its own
_QUOTED_LINE = lazyre.compile(r'^"[^"]*\s[^"]{8,}"\s*$')
# ... and one set in bold, whole
_BOLD_LINE = lazyre.compile(r"\*\*(?!\s)(?:(?!\*\*).)+(?<!\s)\*\*\s*$")


def _json_object(text: str) -> dict | None:
    """The JSON object a line holds; None when it is not JSON after all, nests past the
    parser's depth, or is not an object."""
    try:
        record = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return record if isinstance(record, dict) else None


def _docker_json(out: Peeled) -> None:
    """docker's json-file driver: {"log":"<line>\\n","stream":"stderr","time":"..."}."""
    if not out.text.startswith('{"log":'):
        return
    record = _json_object(out.text)
    if record is None or not isinstance(record.get("log"), str):
        return
    out.text, out.dropped = clean_parts(record["log"].rstrip("\n"))
    time = record.get("time")
    if isinstance(time, str):
        out.timestamp = time
    out.layers += ("docker-json",)


_LEVEL_KEYS = frozenset(("level", "severity", "levelname"))
_JSON_LEVELS = {"ERROR": "ERROR", "WARN": "WARNING", "WARNING": "WARNING", "INFO": "INFO", "DEBUG": "DEBUG",
                "TRACE": "DEBUG", "FATAL": "FATAL", "CRITICAL": "CRITICAL", "PANIC": "FATAL"}


# an error class as an API names it in its error object ("BadRequestError")
_ERROR_CLASS = lazyre.compile(r"(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception)")


# the keys of an error answer that says what failed only in words
_ERROR_ANSWER_KEYS = frozenset(("error", "code", "status", "status_code"))


def _json_error(out: Peeled, record: dict) -> bool:
    """An API's error answer pasted as it came back: vLLM's and SGLang's OpenAI-compatible
    `{"object": "error", "message": "...", "type": "BadRequestError", "code": 400}`, or
    one nested under "error". The line becomes the exception line it stands for; an
    answer that names no type (`{"error":"..."}`) becomes an ERROR record."""
    said = record.get("error")
    if isinstance(said, str) and said.strip() and record.keys() <= _ERROR_ANSWER_KEYS:
        # ollama's and llama-server's answer, {"error":"<what failed>"}: an error in words
        out.text = f"ERROR {said.strip()}"
        out.layers += ("json-error",)
        return True
    error = said if isinstance(said, dict) else record
    message, kind = error.get("message"), error.get("type") or error.get("name")
    if not (isinstance(message, str) and message.strip() and isinstance(kind, str) and _ERROR_CLASS.fullmatch(kind)):
        return False
    if error is record and record.get("object") != "error" and "code" not in record:
        return False  # (a log record with a type field is no error answer)
    out.text = f"{kind}: {message}"
    out.layers += ("json-error",)
    return True


def _json_record(out: Peeled) -> None:
    """A program that logs JSON records (Rust's tracing, Go's zap and slog, structlog):
    {"timestamp": ..., "level": "ERROR", "message": "...", "target": ...}. The line becomes
    its level and its message, as a text logger prints them, so the level-word prefix reads
    them; a record whose message spans lines is left whole (its escaped traceback is read
    as one, kb.core.tracebacks)."""
    record = _json_object(out.text)
    if record is None:
        return
    if _json_error(out, record):
        return
    fields = record.get("fields") if isinstance(record.get("fields"), dict) else {}
    message = next((m for m in (record.get("message"), record.get("msg"), fields.get("message")) if isinstance(m, str)), None)
    level = record.get("level") or record.get("severity") or record.get("levelname")
    level = _JSON_LEVELS.get(level.upper()) if isinstance(level, str) else None
    if message is None or "\n" in message or (level is None and not (message and _LEVEL_KEYS & record.keys())):
        return
    # a record whose level field says nothing ("None": a formatter that filled every field
    # from a record it was not given) is its message, whose own head may carry the level
    out.text = (f"{level} {message}" if message else level) if level else message
    time = record.get("timestamp") or record.get("time") or record.get("ts")
    if isinstance(time, str) and out.timestamp is None:
        out.timestamp = time
    out.layers += ("json-record",)
