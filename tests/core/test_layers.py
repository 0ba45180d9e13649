"""The direction of the layers: the pure core imports no storage or service, the storage
layer (kb.db) no service, web or command module. Read from the source's imports (also
the ones inside functions), so a lazy import cannot hide a wrong direction."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

KB = Path(__file__).resolve().parents[2] / "kb"

FORBIDDEN = {
    "core": ("kb.db", "kb.services", "kb.web", "kb.commands", "kb.client"),
    "db": ("kb.services", "kb.web", "kb.commands", "kb.client"),
}


def imported_modules(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_a_layer_imports_nothing_above_it(layer):
    wrong = sorted(f"{path.relative_to(KB.parent)} imports {name}"
                   for path in (KB / layer).rglob("*.py")
                   for name in imported_modules(path)
                   if name.startswith(FORBIDDEN[layer]))
    assert wrong == []


def test_the_check_sees_a_lazy_import(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from kb.services.seeding import seed_database\n")
    assert "kb.services.seeding" in imported_modules(module)
