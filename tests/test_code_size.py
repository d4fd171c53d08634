"""Shipped code stays in small pieces: no module over 500 lines and no function over 60, in
every folder of the project but the tests (``bench/`` and ``sandbox/`` included)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).parent.parent
FOLDERS = ("ductwork", "assets", "serve", "pipelines", "warehouse_sql", "sandbox", "bench")
MOST_MODULE_LINES = 500
MOST_FUNCTION_LINES = 60


def sizes_over_the_limits() -> dict[str, int]:
    """Every module and function of the shipped folders over its limit, with its lines."""
    over = {}
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            name = str(path.relative_to(ROOT))
            source = path.read_text(encoding="utf-8")
            if source.count("\n") > MOST_MODULE_LINES:
                over[name] = source.count("\n")
            for node in ast.walk(ast.parse(source)):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    lines = (node.end_lineno or node.lineno) - node.lineno + 1
                    if lines > MOST_FUNCTION_LINES:
                        over[f"{name}:{node.name}"] = lines
    return over


def test_no_module_or_function_is_over_the_limits() -> None:
    over = sizes_over_the_limits()
    assert not over, (
        f"over {MOST_MODULE_LINES} lines a module or {MOST_FUNCTION_LINES} a function: {over}"
    )
