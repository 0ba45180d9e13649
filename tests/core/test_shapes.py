"""The capture-shape generator itself: each shape reproduces its tool's real format, keeps
the log's lines and content, and is deterministic for a seed."""

import json
import re

import pytest

from kb.core.shapes import SHAPES, recapture

LINE = "INFO 05-01 12:00:00 [api_server.py:1] vLLM API server version 0.8.3"
TS, TS_TRIM, TS_US = "2024-05-01T12:00:00.123456789Z", "2024-05-02T13:01:01.12445779Z", "2024-05-01T12:00:00.123456Z"
LOG = (f"{LINE}\n"
       "ERROR 05-01 12:00:01 [core.py:2] EngineCore failed to start.\n"
       "Traceback (most recent call last):\n"
       '  File "/x/vllm/v1/engine/core.py", line 9, in <module>\n'
       "\tboom()\n"
       "torch.OutOfMemoryError: CUDA out of memory & <more>\n"
       "\n"
       "(EngineCore_DP0 pid=99) WARNING 05-01 12:00:02 [x.py:3] caf\u00e9 \u2028 \"quoted\"\n").encode()
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def first(shape, data=LINE + "\n", seed=0):
    return recapture(data.encode(), shape, seed).decode().split("\n")[0]


@pytest.mark.parametrize("shape, expected", [
    ("compose", f"vllm-1  | {LINE}"),
    ("docker-json", f'{{"log":"{LINE}\\n","stream":"stdout","time":"{TS}"}}'),
    ("cri", f"{TS} stdout F {LINE}"),
    ("kubectl-timestamps", f"{TS} {LINE}"),
    ("journald", f"May 01 12:00:00 gpu-node-3 vllm[12345]: {LINE}"),
    ("syslog-5424", f"<14>1 {TS_US} gpu-node-3 vllm 12345 - - {LINE}"),
    ("syslog-3164", f"<14>May  1 12:00:00 gpu-node-3 vllm[12345]: {LINE}"),
    ("srun", f"0: {LINE}"),
    ("mpirun", f"[1,0]<stdout>:{LINE}"),
    ("ray", f"(RayWorkerWrapper pid=12345, ip=10.0.0.5) {LINE}"),
    ("quote", f"> {LINE}"),
    ("indented", f"    {LINE}"),
    ("ansi", "\x1b[32mINFO\x1b[0m \x1b[90m05-01 12:00:00\x1b[0m \x1b[90m[api_server.py:1]\x1b[0m"
             " vLLM API server version 0.8.3"),
    ("crlf", f"{LINE}\r"),
    ("wrap-80", LINE),
    ("wrap-120", LINE),
])
def test_sample_line_is_the_tools_format(shape, expected):
    assert first(shape) == expected


def test_error_lines_go_to_stderr_and_the_seed_moves_time_and_identity():
    tb = "Traceback (most recent call last):\n"
    assert first("mpirun", tb) == "[1,0]<stderr>:Traceback (most recent call last):"
    assert first("syslog-3164", tb).startswith("<11>May  1 12:00:00 ")
    assert first("docker-json", 'x < y & "z"\t\x01\n') == \
        f'{{"log":"x \\u003c y \\u0026 \\"z\\"\\u0009\\u0001\\n","stream":"stdout","time":"{TS}"}}'
    # Go's RFC3339Nano drops trailing zeros (dockerd, containerd); the kubelet keeps 9 digits
    assert first("docker-json", seed=1).endswith(f'"time":"{TS_TRIM}"}}')
    assert first("cri", seed=1) == f"{TS_TRIM} stdout F {LINE}"
    assert first("kubectl-timestamps", seed=1) == f"2024-05-02T13:01:01.124457790Z {LINE}"
    assert first("syslog-3164", seed=1) == f"<14>May  2 13:01:01 gpu-node-4 vllm[13354]: {LINE}"
    assert first("journald", seed=1) == f"May 02 13:01:01 gpu-node-4 vllm[13354]: {LINE}"
    assert first("srun", seed=1) == f"01: {LINE}"
    assert first("mpirun", seed=1) == f"[1,1]<stdout>:{LINE}"


@pytest.mark.parametrize("shape", SHAPES)
def test_line_count_kept_deterministic_and_empty_stays_empty(shape):
    out = recapture(LOG, shape, seed=3)
    assert out.count(b"\n") == LOG.count(b"\n") and out.endswith(b"\n")
    assert out == recapture(LOG, shape, seed=3)
    assert recapture(b"", shape, seed=3) == b""
    unterminated = recapture(b"one\ntwo", shape)
    assert unterminated.count(b"\n") == 1 and not unterminated.endswith(b"\n")


@pytest.mark.parametrize("shape", ["docker-json", "cri", "kubectl-timestamps", "journald",
                                   "syslog-5424", "syslog-3164", "srun", "mpirun", "ray"])
def test_the_seed_changes_time_or_identity(shape):
    assert recapture(LOG, shape, seed=0) != recapture(LOG, shape, seed=1)


def test_docker_json_is_valid_json_whose_log_round_trips():
    records = [json.loads(r) for r in recapture(LOG, "docker-json").decode().split("\n")[:-1]]
    assert [r["log"] for r in records] == [line + "\n" for line in LOG.decode().split("\n")[:-1]]
    assert [r["stream"] for r in records][1:6] == ["stderr"] * 5 and records[0]["stream"] == "stdout"
    times = [r["time"] for r in records]
    assert times == sorted(times) and len(set(times)) == len(times)
    stamps = [line.split(b" ")[1] for line in recapture(LOG, "syslog-5424", 5).split(b"\n")[:-1]]
    assert stamps == sorted(stamps) and len(set(stamps)) == len(stamps)
    last = json.loads(recapture(b"a\nno newline", "docker-json").decode().splitlines()[-1])
    assert last["log"] == "no newline"
    bad = json.loads(recapture(b"bad \xff byte\n", "docker-json"))
    assert bad["log"] == "bad \ufffd byte\n"


def test_long_lines_become_runtime_partials_that_rejoin():
    line = "\u00e9" * 20000  # 40000 bytes, split inside a UTF-8 sequence at 16 KiB
    records = recapture(f"{line}\n".encode(), "cri").split(b"\n")[:-1]
    assert [r.split(b" ", 3)[2] for r in records] == [b"P", b"P", b"F"]
    assert b"".join(r.split(b" ", 3)[3] for r in records) == line.encode()
    docker = [json.loads(r) for r in recapture(f"{line}\n".encode(), "docker-json").split(b"\n")[:-1]]
    assert len(docker) == 3 and not docker[0]["log"].endswith("\n") and docker[-1]["log"].endswith("\n")
    kubectl = recapture(f"{line}\n".encode(), "kubectl-timestamps")
    assert kubectl.count(b"\n") == 1 and len(re.findall(rb"2024-05-01T\d\d:\d\d:\d\d\.\d{9}Z ", kubectl)) == 3
    assert recapture(b"x" * 16384 + b"\n", "cri").count(b"\n") == 1  # containerd splits only beyond
    assert recapture(b"tail", "cri").endswith(b" stdout P tail")  # unterminated: partial


def test_undecodable_bytes_survive_byte_shapes():
    data = b"ok \xff\xfe here\n\xe2\x82 cut\n"
    for shape in ("compose", "cri", "srun", "crlf", "wrap-80"):
        assert b"\xff\xfe here" in recapture(data, shape) and b"\xe2\x82 cut" in recapture(data, shape)


@pytest.mark.parametrize("width", [80, 120])
def test_wrap_pieces_are_exactly_w_characters_and_rejoin(width):
    long = "caf\u00e9 " * 60 + "end"  # 303 characters, more bytes
    out = recapture(f"short\n{long}\n".encode(), f"wrap-{width}").decode().split("\n")[:-1]
    assert out[0] == "short"
    pieces = out[1:]
    assert all(len(p) == width for p in pieces[:-1]) and 0 < len(pieces[-1]) <= width
    assert "".join(pieces) == long and len(pieces) == -(-len(long) // width)


def test_ansi_removal_gives_the_original_and_colours_were_added():
    out = recapture(LOG, "ansi").decode()
    assert ANSI.sub("", out) == LOG.decode()
    assert "\x1b[31mERROR\x1b[0m" in out and "\x1b[1;36m(EngineCore_DP0 pid=99)\x1b[0;0m" in out
    assert "\x1b[31mTraceback (most recent call last):\x1b[0m" in out


def test_ray_keeps_lines_that_already_carry_a_ray_prefix():
    out = recapture(b"(RayWorkerWrapper pid=7, ip=10.0.0.9) hello\nplain\n", "ray").decode()
    assert out == "(RayWorkerWrapper pid=7, ip=10.0.0.9) hello\n(RayWorkerWrapper pid=12345, ip=10.0.0.5) plain\n"


def test_journald_shows_what_journalctl_shows_and_unknown_shapes_fail():
    out = first("journald", "\x1b[31mred\x1b[0m\tx\r\n")
    assert out == "May 01 12:00:00 gpu-node-3 vllm[12345]: red        x"
    assert recapture(b"a\r\nb\r\n", "crlf") == b"a\r\nb\r\n"
    with pytest.raises(ValueError, match="unknown capture shape"):
        recapture(b"x\n", "fluentd")


def test_ray_forwards_an_engines_own_process_labels_behind_its_label():
    """Ray Serve LLM: the replica's lines carry Ray's label and then vLLM's (every piece of
    a wrapped line too, so the pieces stay one stream)."""
    out = recapture(b"(EngineCore pid=316) ValueError: x\n) continued\n", "ray").decode()
    assert out == ("(RayWorkerWrapper pid=12345, ip=10.0.0.5) (EngineCore pid=316) ValueError: x\n"
                   "(RayWorkerWrapper pid=12345, ip=10.0.0.5) ) continued\n")
