"""Console entry of `kb`. `kb analyze LOG [--json] [--no-kb]` runs on huge logs from scripts,
where start-up time counts (the benchmark compares it with grep): that one form runs
without loading the command-line framework. Everything else, help and errors
included, goes through `kb.cli`."""

from __future__ import annotations

import gc
import os
import sys


def main() -> None:
    args = sys.argv[1:]
    if args[:1] == ["analyze"]:
        rest = [arg for arg in args[1:] if arg not in ("--json", "--no-kb")]
        if len(rest) == 1 and (rest[0] == "-" or not rest[0].startswith("-")):
            from kb.commands import cache

            cache.load_programs()  # before the core's modules compile their patterns
            from kb.commands.analysis import analyze_stream, open_log, render

            # What the imports built lives until exit: the collector need not scan it
            # again each time the analysis allocates (~15% of a 100 MB run).
            gc.freeze()
            try:
                stream = open_log(rest[0])
            except OSError:
                pass  # kb.cli says why, in its usual words
            else:
                from kb.core.textlog import LogRejected

                with stream:
                    try:
                        result = analyze_stream(stream)
                    except LogRejected as exc:  # kb.cli's words for the same refusal
                        sys.stderr.write(f"Error: {rest[0]}: {exc}\n")
                        sys.exit(1)
                try:
                    sys.stdout.write(render(result, "--json" in args[1:],
                                            advice="--no-kb" not in args[1:]) + "\n")
                    sys.stdout.flush()
                except BrokenPipeError:  # `kb analyze LOG | head`: the reader has what it wanted
                    pass
                cache.save_programs()
                os._exit(0)  # all is written: tearing down what the analysis built is wasted time
    from kb.cli import main as cli

    cli()


if __name__ == "__main__":
    main()
