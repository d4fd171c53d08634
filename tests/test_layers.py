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
