"""The documentation's settings page, made from the settings model (``ductwork.settings``):
a table per group of settings, each row a variable, its default and its description."""

from __future__ import annotations

import inspect
from pathlib import Path

from pydantic.fields import FieldInfo

from ductwork import file_modes, output_files
from ductwork.settings import ALL_GROUPS, PREFIX, S3Settings

PAGE = Path("docs/settings.md")
HEAD = """# Settings

Every setting is an environment variable; a missing required one is reported in one line that
names it. This page is made from the settings model (`ductwork/settings/`) by `ductwork docs`;
edit the model, not this page.
"""
# Read by boto3 itself, not by ductwork's model.
CREDENTIALS_ROW = (
    "| `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY` | boto3's chain | Object-store credentials, "
    "read by boto3 as usual (any value for moto). |"
)


def default_text(field: FieldInfo) -> str:
    """A setting's default as the page shows it: ``required``, ``unset``, or the value."""
    if field.is_required():
        return "required"
    shown = (
        (field.json_schema_extra or {}).get("default_shown")
        if isinstance(field.json_schema_extra, dict)
        else None
    )
    if shown is not None:
        return f"`{shown}`"
    if field.default is None and field.default_factory is None:
        return "unset"
    default = field.default if field.default_factory is None else field.default_factory()
    return f"`{default}`"


def settings_page() -> str:
    """The settings page: each group of ``ALL_GROUPS`` under its docstring, as a heading."""
    lines = [HEAD]
    for group in ALL_GROUPS:
        summary = " ".join((inspect.getdoc(group) or group.__name__).split()).rstrip(".")
        summary = summary.replace("``", "`")
        lines += [f"## {summary}", "", "| variable | default | meaning |", "| --- | --- | --- |"]
        for name, field in group.model_fields.items():
            variable = f"{PREFIX}{name.upper()}"
            meaning = " ".join((field.description or "").split())
            lines.append(f"| `{variable}` | {default_text(field)} | {meaning} |")
        if group is S3Settings:
            lines.append(CREDENTIALS_ROW)
        lines.append("")
    return "\n".join(lines)


def write_settings_page(out: Path, force: bool = False) -> int:
    """Write the settings page to ``out``, a new file unless ``force`` lets it replace a regular
    one (``ductwork.output_files``); returns an exit code."""
    file_modes.current().make_private_dir(out.parent)
    with output_files.new_file(out, force) as sink:
        sink.write(settings_page().encode("utf-8"))
    print(f"wrote {out}")
    return 0
