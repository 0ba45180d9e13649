"""Joining a hard-wrapped copy back: numbered where each line starts, never across the
start of a new record."""

from kb.core.capture import Profile, unglued
from kb.core.rejoin import Rejoiner

CUT = "ERROR 05-01 12:00:01 [core.py:9] ValueError: the model's max seq len (131072) is larger than the"
REST = "maximum number of tokens that can be stored in KV cache (8192)."


def _joined(profile, lines):
    rejoiner, out = Rejoiner(profile), []
    for number, text in enumerate(lines, 1):
        out += rejoiner.feed(number, text)
    out += rejoiner.flush(len(lines))
    return [(j.first, j.last, j.line if isinstance(j.line, str) else j.line.text) for j in out]


def test_a_cut_line_is_one_line_numbered_where_it_starts():
    profile = Profile(wrap_width=len(CUT))
    assert _joined(profile, ["INFO start", CUT, REST, "INFO next"]) == [
        (1, 1, "INFO start"), (2, 3, CUT + REST), (4, 4, "INFO next")]


def test_a_line_of_the_full_width_followed_by_a_new_record_is_not_joined_to_it():
    profile = Profile(wrap_width=len(CUT))
    record = "ERROR 05-01 12:00:02 [core.py:9] EngineCore failed to start."
    assert _joined(profile, [CUT, record]) == [(1, 1, CUT), (2, 2, record)]


def test_inside_a_capture_the_pieces_of_one_stream_are_joined_without_their_prefixes():
    profile = Profile(inner_wrap_width=len(CUT))
    lines = [f"0: {CUT}", "1: INFO other task", f"0: {REST}"]
    assert _joined(profile, lines) == [(1, 1, CUT), (2, 2, "INFO other task"), (3, 3, REST)]
    assert _joined(profile, [f"0: {CUT}", f"0: {REST}"]) == [(1, 2, CUT + REST)]


def test_a_cut_inside_a_word_joins_even_when_the_rest_starts_with_a_level_word():
    """'... Worker exit type: SYSTEM_' | 'ERROR Worker exit detail ...': the terminal cut
    SYSTEM_ERROR in two; a bare level word there is the word's rest, not a new record."""
    cut = "The actor is dead because its worker process has died. Worker exit type: SYSTEM_"
    rest = "ERROR Worker exit detail: Worker unexpectedly exits with a connection error code 2."
    profile = Profile(wrap_width=len(cut))
    assert _joined(profile, [cut, rest]) == [(1, 2, cut + rest)]
    # a record header that says more than a level word still starts a record
    record = "ERROR 05-01 12:00:02 [core.py:9] EngineCore failed to start."
    assert _joined(profile, [cut, record]) == [(1, 1, cut), (2, 2, record)]


def test_docker_json_records_of_one_length_are_whole_lines_not_a_terminal_wrap():
    """Each json-file record is a whole JSON object: two of the same length are a
    coincidence of a short log, never a terminal's cut."""
    import json

    from kb.core.analyze import analyze

    def record(line: str, ts: str) -> str:
        return json.dumps({"log": line + "\n", "stream": "stderr", "time": ts}, separators=(",", ":"))

    code = "    assert layer.qk_head_dim == layer.v_head_dim or self.use_mla"
    # a path that makes both records as long (the frame's quotes are escaped in JSON)
    path = "/sgl/srt/triton_backend.py"
    path = "/sgl" + "x" * (len(code) - len(f'File "{path}", line 741, in f') - 2) + path[4:]
    frame = f'File "{path}", line 741, in f'
    lines = [record(frame, "2025-11-02T08:14:51.153486819Z"), record(code, "2025-11-02T08:14:51.190663970Z"),
             record("AssertionError", "2025-11-02T08:14:51.211071614Z")]
    assert len(lines[0]) == len(lines[1])
    assert Profile.learn(lines).wrap_width is None
    root = analyze("\n".join(lines).encode() + b"\n").root_cause
    assert (root.exception, root.message) == ("AssertionError", code.strip())


def test_a_line_exactly_three_widths_long_is_learned_as_wrapped_though_no_piece_is_shorter():
    """A one-line paste whose length is a multiple of the terminal's width ends in a full
    piece: the cuts inside words are the evidence, and the line is joined back whole."""
    line = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 26.00 MiB. GPU 1 has a total capacity "
            "of 15.77 GiB of which 44.44 MiB is free. Including non-PyTorch memory, this process has 14.05 GiB "
            "memory in use. Of the allocated memory 13.56 GiB is allocated by PyTorch")
    line = line[:240].ljust(240, "x")
    pieces = [line[i:i + 80] for i in range(0, 240, 80)]
    assert Profile.learn(pieces).wrap_width == 80
    assert Profile.learn(pieces[:1] + ["INFO 05-01 12:00:02 [core.py:9] next record"]).wrap_width is None


def test_one_cut_on_a_space_is_learned_from_a_short_excerpt():
    """A single line cut at a terminal width where a space fell: its rest starts with
    that one space. An indented line (more spaces) is still not a rest."""
    cut = "[2025-10-13 09:06:25] node-0:3663:4044 [0] misc/shmutils.cc:129 NCCL WARN Error while creating shared"
    cut = cut.replace("node-0", "node-0" + "x" * (120 - len(cut)))
    assert len(cut) == 120
    rest = " memory segment /dev/shm/nccl-Ewjreo (size 33030528), error: No space left on device (28)"
    after = "node-0:3663:4044 [0] NCCL INFO proxy.cc:1336 -> 2"
    assert Profile.learn([cut, rest, after]).wrap_width == 120
    assert Profile.learn([cut, "    " + rest.strip(), after]).wrap_width is None


def test_one_line_that_ends_a_sentence_at_a_terminal_width_is_no_cut():
    """A line of exactly 150 characters that ends its sentence, then the next program's
    record: as likely a newline the program printed as a cut, so no width is learned and
    the two lines stay apart."""
    line = ("slurmstepd: error: Detected 1 oom-kill event(s) in StepId=4242.0. Some of your "
            "processes may have been killed by the cgroup out-of-memory handler.")
    line = line.replace("4242", "4242" + "0" * (150 - len(line)))
    assert len(line) == 150
    assert Profile.learn([line, "srun: error: node7: task 0: Out Of Memory"]).wrap_width is None
    assert Profile.learn([line[:-1] + "s", "rvice handler stopped the step"]).wrap_width == 150


def test_one_cut_inside_a_word_is_learned_though_the_rest_reads_as_an_error():
    """A 120-column cut inside a path ("...distributed/cust" | "om_all_reduce.cuh:37: CUDA
    error: ..."): the rest is the word's, though it reads like a CUDA check's own line.
    A rest that starts a word of its own, in capitals, is not evidence."""
    cut = "RuntimeError: Runtime check failed at /sgl-workspace/sglang/python/sglang/jit_kernel/include/distributed/cust"
    cut = cut.replace("sgl-workspace", "sgl-workspace" + "x" * (120 - len(cut)))
    assert len(cut) == 120
    after = ["", "Exception: Capture cuda graph failed"]
    assert Profile.learn([cut, "om_all_reduce.cuh:37: CUDA error: invalid argument", *after]).wrap_width == 120
    assert Profile.learn([cut[:-4] + "ops/", "CUDA error: invalid argument", *after]).wrap_width is None


def test_a_padded_copy_that_lost_its_line_breaks_is_read_apart_and_columns_stay_whole():
    """A console pads each line to its width; a copy that lost the breaks glues the next
    line on after the padding. Right-aligned columns and a message's own spaces are not
    such breaks."""
    frame = '  File "/srv/app/vllm/worker/worker.py", line 941, in shutdown'
    assert unglued(frame.ljust(160) + "AttributeError: 'NoneType' object has no attribute 'getenv'") == [
        frame, "AttributeError: 'NoneType' object has no attribute 'getenv'"]
    assert unglued(frame.ljust(160) + frame.strip()) == [frame, frame]  # the next frame keeps its indent
    rich = "['pipeline'] Failed to load step                           local.py:302"
    assert unglued(rich) == [rich]
    table = "| worker-3 |                    RuntimeError |"
    assert unglued(table) == [table]


def test_a_labeled_stream_pasted_with_its_breaks_turned_to_spaces_is_read_apart():
    """`srun --label` output pasted into one line: the label that recurs at each former
    line's head splits it; a label-like number that does not recur does not."""
    lines = ["Traceback (most recent call last):", 'File "/opt/serve.py", line 10, in <module>',
             "main()", "ValueError: Bfloat16 is only supported on GPUs with compute capability of at least 8.0."]
    assert unglued("3: " + " 3: ".join(lines)) == ["3: " + lines[0], *lines[1:]]
    two = "stage 1: loading weights took 12 s, stage 1: warmup took 3 s"
    assert unglued(two) == [two]
    ratios = "ranks 0: 12 ms 1: 13 ms 2: 12 ms 3: 14 ms"  # labels that differ: a table, not a prefix
    assert unglued(ratios) == [ratios]
