"""Bad input gets a clear answer, never a traceback: binary, empty, a line that never
ends, nesting deeper than any parser's stack."""

from kb.core.analyze import Analyzer, analyze


def test_empty_input_is_no_error():
    result = analyze(b"")
    assert result.root_cause is None and result.verdict == "no_error" and result.lines == 0


def test_binary_input_is_no_error():
    result = analyze(bytes(range(256)) * 4096)
    assert result.verdict == "no_error"


def test_a_docker_json_line_nested_past_the_parsers_depth_is_read_as_text():
    line = b'{"log":' + b"[" * 200_000 + b"]" * 200_000 + b"}\n"
    result = analyze(line + b"ValueError: after the nesting\n")
    assert (result.root_cause.exception, result.root_cause.line_number) == ("ValueError", 2)


def test_deeply_nested_brackets_and_chains_in_text_are_safe():
    text = ("RuntimeError: " + "(" * 50_000 + ")" * 50_000 + "\n"
            + "During handling of the above exception, another exception occurred:\n\n" * 2_000
            + "ValueError: last\n")
    assert analyze(text.encode()).root_cause is not None


def test_a_200_mb_line_that_never_ends_is_cut_and_the_lines_after_it_keep_their_numbers():
    """Fed in 1 MiB chunks, as the service and the CLI stream it: memory stays bounded
    and the error after the line is found on line 2."""
    analyzer, chunk = Analyzer(), b"x" * (1 << 20)
    for _ in range(200):
        analyzer.feed(chunk)
    analyzer.feed(b"\nValueError: after the long line\n")
    result = analyzer.finish()
    assert (result.root_cause.exception, result.root_cause.line_number, result.lines) == ("ValueError", 2, 2)


def _ref(j: int) -> str:
    return "S_" if j == 0 else f"S{j - 1}_"


PATHOLOGICAL = {  # each once took seconds to minutes, or raised (found in review)
    "mangled-name-nested-past-the-stack": b"logging.cc:97: Unhandled exception: N1a" + b"IN1a" * 2000 + b"E" * 4000 + b". what(): x\n",
    "mangled-name-back-references": ("logging.cc:97: Unhandled exception: N1a" + "".join(
        "I" + _ref(j) * 30 + "E" for j in range(5)) + "E. what(): x\n").encode(),
    "go-signal-then-words": b"signal: " + b"a " * 32500 + b"x\n",
    "linker-then-slashes": b"undefined reference to " + b"/" * 65000 + b"\n",
    "digits-after-an-exception": b"ValueError: bad\n" + b"1" * 65000 + b"\n",
    "rich-line-of-spaces": b"[05/05/25 16:31:14] INFO     hi" + b" " * 60000 + b"x\n",
    "glibc-assert-prefixes": b"p: f:1: " * 8125 + b"x Assertion x\n",
    "ggml-assert-openings": b"GGML_ASSERT(" * 5400 + b"\n",
}


def test_pathological_lines_are_read_at_line_speed_and_never_raise():
    for name, data in PATHOLOGICAL.items():
        result = analyze(data + b"ValueError: after\n")
        assert result.root_cause is not None, name
