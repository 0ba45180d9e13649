"""The `kb` command. Each subcommand lives next to the concept it drives and is
imported only when called, so `kb analyze` never pays for the web stack."""

from __future__ import annotations

import importlib

import click

# name -> "module:attribute" of a click command
COMMANDS = {
    "analyze": "kb.commands.analyze:analyze",
    "eval": "kb.commands.evaluate:evaluate",
    "serve": "kb.web.commands:serve",
    "db": "kb.db.commands:db",
    "seed": "kb.commands.seed:seed",
    "export": "kb.commands.packs:export",
    "import": "kb.commands.packs:import_",
    "reanalyze": "kb.commands.reanalyze:reanalyze",
    "run": "kb.client.commands:run",
    "submit": "kb.client.commands:submit",
    "flush": "kb.client.commands:flush",
    "search": "kb.client.browse:search",
    "show": "kb.client.browse:show",
}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        target = COMMANDS.get(name)
        if target is None:
            return None
        module_name, attribute = target.split(":")
        return getattr(importlib.import_module(module_name), attribute)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="crash-kb")
def main() -> None:
    """Crash KB: find the root cause of an LLM engine crash and the fixes already known."""


if __name__ == "__main__":
    main()
