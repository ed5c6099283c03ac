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
    folder, ``fuzz/cli/``, for every module under it that has no row of its own)."""
    text = (ROOT / "docs" / "design.md").read_text()
    table = text[text.index("| stage | module | what it does |") :].split("\n\n", 1)[0]
    rows: dict[str, int] = {}
    for i, line in enumerate(table.splitlines()[2:]):
        cell = line.split("|")[2]
        for path in re.findall(r"`([^`]+)`", cell):
            name = (
                "strategies"
                if path.startswith("strategies")
                else path.removesuffix(".py").removesuffix("/__init__").removesuffix("/").replace("/", ".")
            )
            rows[name] = i
    return rows


def module_names() -> dict[str, Path]:
    """Every module of ``fuzz`` by its dotted name (a package by its ``__init__``)."""
    out: dict[str, Path] = {}
    for path in sorted((ROOT / "fuzz").rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def _module_of(name: str, known: dict[str, Path]) -> str | None:
    """The module ``name`` is or lies in (``fuzz.backends.resolve_fold`` -> ``fuzz.backends``)."""
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def imports(path: Path) -> set[str]:
    """The ``fuzz`` modules and ``strategies`` that ``path`` imports, anywhere in it."""
    known = module_names()
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names: list[str] = []
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        for name in names:
            if name.startswith("strategies"):
                found.add("strategies")
            elif name.startswith("fuzz."):
                module = _module_of(name, known)
                if module is not None:
                    found.add(module)
    return found


def _row_of(module: str, rows: dict[str, int]) -> str | None:
    """The row that holds ``module``: its own, or its nearest folder's."""
    while module and module not in rows:
        module = module.rpartition(".")[0]
    return module or None


def _is_layer(path: Path) -> bool:
    """A package that only groups modules (its ``__init__`` a docstring and an empty
    ``__all__``): no row."""
    return path.name == "__init__.py" and all(
        isinstance(node, (ast.Expr, ast.AnnAssign)) for node in ast.parse(path.read_text()).body
    )


def modules() -> dict[str, list[Path]]:
    """Stage-table name -> its source files."""
    out: dict[str, list[Path]] = {"strategies": sorted((ROOT / "strategies").glob("*.py"))}
    rows = stage_rows()
    for name, path in module_names().items():
        if name == "fuzz" or _is_layer(path):
            continue
        out.setdefault(_row_of(name, rows) or name, []).append(path)
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
        for dep in sorted({_row_of(m, rows) or m for m in imports(path)} - {name})
        if dep in rows and rows[dep] > rows[name]
    ]
    assert not upward, "imports against the flow:\n" + "\n".join(upward)


def test_the_check_fails_on_an_upward_import(tmp_path: Path) -> None:
    # the checker itself: a module importing the CLI is caught
    source = tmp_path / "case.py"
    source.write_text("def f():\n    from fuzz.cli import main\n    from fuzz.engine import campaign\n")
    assert imports(source) == {"fuzz.cli", "fuzz.engine.campaign"}
    rows = stage_rows()
    assert (
        rows["fuzz.cli"] > rows["fuzz.model.case"] and rows["fuzz.engine.campaign"] > rows["fuzz.model.case"]
    )


def test_a_module_of_a_layer_is_found_through_its_package() -> None:
    # `from fuzz.backends import resolve_fold` is the registry, `from fuzz.model import case` the module
    known = module_names()
    assert _module_of("fuzz.backends.resolve_fold", known) == "fuzz.backends"
    assert _module_of("fuzz.model.case", known) == "fuzz.model.case"
    assert _row_of("fuzz.cli.run", stage_rows()) == "fuzz.cli"


def layers() -> list[str]:
    """The layers of the Layout table in docs/design.md, in order (``fuzz.model``,
    ``strategies``), a row of several modules as one layer."""
    text = (ROOT / "docs" / "design.md").read_text()
    table = text[text.index("| folder | what it holds |") :].split("\n\n", 1)[0]
    return [
        [
            "strategies"
            if p.startswith("strategies")
            else p.removesuffix(".py").removesuffix("/").replace("/", ".")
            for p in re.findall(r"`([^`]+)`", line.split("|")[1])
        ]
        for line in table.splitlines()[2:]
    ]  # type: ignore[return-value]


def _layer_of(module: str, order: list[list[str]]) -> int | None:
    for i, names in enumerate(order):
        if any(module == n or module.startswith(n + ".") for n in names):
            return i
    return None


def test_no_module_imports_a_later_layer() -> None:
    order = layers()
    upward = [
        f"{name} imports {dep}"
        for name, path in module_names().items()
        if name != "fuzz"
        for dep in sorted(imports(path))
        if (mine := _layer_of(name, order)) is not None
        and (theirs := _layer_of(dep, order)) is not None
        and theirs > mine
    ]
    assert not upward, "imports against the layers:\n" + "\n".join(upward)


def test_every_folder_of_fuzz_is_a_layer() -> None:
    named = {n for names in layers() for n in names}
    folders = {f"fuzz.{p.parent.name}" for p in (ROOT / "fuzz").glob("*/__init__.py")}
    assert folders <= named, sorted(folders - named)
    assert _layer_of("fuzz.render.report", layers()) > _layer_of("fuzz.engine.check", layers())  # type: ignore[operator]


#: A module longer than this is split by what its parts do.
MAX_LINES = 450


def test_no_module_is_longer_than_the_limit() -> None:
    long = {
        str(path.relative_to(ROOT)): n
        for package in ("fuzz", "strategies")
        for path in sorted((ROOT / package).rglob("*.py"))
        if (n := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert not long, f"modules over {MAX_LINES} lines: {long}"
