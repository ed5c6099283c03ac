"""Data flows one way: no module imports one from a later row of the stage table in
``docs/design.md`` ("Stages"), and every module of ``fuzz/`` (and ``strategies/`` as one
stage) has a row.

Imports inside functions count too: a lazy import is still a dependency.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def stage_rows() -> dict[str, int]:
    """Module name -> row of the stage table (``strategies`` for the whole package, and a
    subpackage of ``fuzz`` given as a folder, ``fuzz/cli/``, for the whole subpackage)."""
    text = (ROOT / "docs" / "design.md").read_text()
    table = text[text.index("| stage | module | what it does |") :].split("\n\n", 1)[0]
    rows: dict[str, int] = {}
    for i, line in enumerate(table.splitlines()[2:]):
        cell = line.split("|")[2]
        for path in re.findall(r"`([^`]+)`", cell):
            name = (
                "strategies"
                if path.startswith("strategies")
                else path.removesuffix(".py").removesuffix("/").replace("/", ".")
            )
            rows[name] = i
    return rows


def imports(path: Path) -> set[str]:
    """The ``fuzz`` modules and ``strategies`` that ``path`` imports, anywhere in it."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names: list[str] = []
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
            if node.module == "fuzz":
                names = [f"fuzz.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        for name in names:
            if name.startswith("strategies"):
                found.add("strategies")
            elif name.startswith("fuzz."):
                found.add(".".join(name.split(".")[:2]))
    return found


def modules() -> dict[str, list[Path]]:
    """Stage-table name -> its source files."""
    out: dict[str, list[Path]] = {"strategies": sorted((ROOT / "strategies").glob("*.py"))}
    for path in sorted((ROOT / "fuzz").glob("*.py")):
        if path.stem != "__init__":
            out[f"fuzz.{path.stem}"] = [path]
    for package in sorted(p.parent for p in (ROOT / "fuzz").glob("*/__init__.py")):
        out[f"fuzz.{package.name}"] = sorted(package.glob("*.py"))
    return out


def test_every_module_has_a_row() -> None:
    rows = stage_rows()
    missing = sorted(set(modules()) - set(rows))
    assert not missing, f"modules without a row in the stage table of docs/design.md: {missing}"
    stale = sorted(set(rows) - set(modules()))
    assert not stale, f"rows naming modules that do not exist: {stale}"


def test_no_module_imports_a_later_stage() -> None:
    rows = stage_rows()
    upward = [
        f"{name} (row {rows[name]}) imports {dep} (row {rows[dep]}) in {path.relative_to(ROOT)}"
        for name, paths in modules().items()
        for path in paths
        for dep in sorted(imports(path) - {name})
        if dep in rows and rows[dep] > rows[name]
    ]
    assert not upward, "imports against the flow:\n" + "\n".join(upward)


def test_the_check_fails_on_an_upward_import(tmp_path: Path) -> None:
    # the checker itself: a module importing the CLI is caught
    source = tmp_path / "case.py"
    source.write_text("def f():\n    from fuzz.cli import main\n    from fuzz import campaign\n")
    assert imports(source) == {"fuzz.cli", "fuzz.campaign"}
    rows = stage_rows()
    assert rows["fuzz.cli"] > rows["fuzz.case"] and rows["fuzz.campaign"] > rows["fuzz.case"]
