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
