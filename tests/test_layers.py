"""Imports between the top-level folders run one way (docs/architecture.md, its layout)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).parent.parent
FOLDERS = ("ductwork", "assets", "serve", "pipelines", "sandbox", "warehouse_sql", "bench")
# What each folder may import besides itself.
ALLOWED: dict[str, set[str]] = {
    "warehouse_sql": set(),
    "ductwork": {"warehouse_sql"},
    "assets": {"ductwork", "warehouse_sql"},
    "serve": {"ductwork", "warehouse_sql"},
    "sandbox": {"ductwork"},
    "pipelines": {"ductwork", "warehouse_sql", "assets", "serve", "sandbox"},
    "bench": {"ductwork", "warehouse_sql", "assets", "serve", "sandbox", "pipelines"},
}


def imported_folders(source: Path) -> set[str]:
    """The top-level project folders a module imports, at any depth of its code."""
    found = set()
    for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        found.update(name.split(".")[0] for name in names if name.split(".")[0] in FOLDERS)
    return found


def test_every_import_between_top_level_folders_follows_the_layers() -> None:
    wrong = []
    for folder, allowed in ALLOWED.items():
        for source in sorted((ROOT / folder).rglob("*.py")):
            for target in imported_folders(source) - allowed - {folder}:
                wrong.append(f"{source.relative_to(ROOT)} imports {target}")
    assert not wrong, "\n".join(wrong)


def test_the_core_has_no_dagster_in_it() -> None:
    dagster_users = [
        str(source.relative_to(ROOT))
        for source in sorted((ROOT / "ductwork").rglob("*.py"))
        if "dagster" in {name.split("_")[0] for name in _top_modules(source)}
    ]
    assert not dagster_users, dagster_users


def _top_modules(source: Path) -> set[str]:
    modules = set()
    for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            modules.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules.add(node.module.split(".")[0])
    return modules


# The shipped folders inside which no module may import, at any depth of its code, one that
# comes back to it: a circle of imports holds only by the order in which they happen to run.
NO_CIRCLES_IN = ("ductwork", "assets", "serve", "pipelines")


def module_of(path: Path) -> str:
    """The dotted name of the module at ``path``."""
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(source: Path, known: set[str]) -> set[str]:
    """The modules of ``known`` that ``source`` imports, at any depth of its code: a name
    imported from a package is its submodule where one of that name exists."""
    found = set()
    for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            for alias in node.names:
                submodule = f"{node.module}.{alias.name}"
                found.add(submodule if submodule in known else node.module)
    return found & known


def import_circles(folders: tuple[str, ...]) -> list[list[str]]:
    """Every set of two or more modules of ``folders`` that import one another round a
    circle (the strongly connected components of the import graph), each sorted."""
    files = {module_of(p): p for folder in folders for p in (ROOT / folder).rglob("*.py")}
    known = set(files)
    edges = {name: imported_modules(path, known) - {name} for name, path in files.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles: list[list[str]] = []

    def visit(name: str) -> None:
        index[name] = low[name] = len(index)
        stack.append(name)
        for target in sorted(edges[name]):
            if target not in index:
                visit(target)
                low[name] = min(low[name], low[target])
            elif target in stack:
                low[name] = min(low[name], index[target])
        if low[name] == index[name]:
            members = []
            while True:
                member = stack.pop()
                members.append(member)
                if member == name:
                    break
            if len(members) > 1:
                circles.append(sorted(members))

    for name in sorted(files):
        if name not in index:
            visit(name)
    return circles


def test_no_import_circle_inside_the_shipped_folders() -> None:
    assert import_circles(NO_CIRCLES_IN) == []


def test_an_import_circle_is_found_where_there_is_one() -> None:
    """The check itself: the sandbox's state and its mutations import each other."""
    circles = import_circles(("sandbox",))
    assert ["sandbox.mutations", "sandbox.state"] in circles
