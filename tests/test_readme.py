"""The README stays true: its commands and its settings table."""

from __future__ import annotations

import re
from pathlib import Path

from ductwork.settings import ALL_GROUPS, PREFIX

FOLDERS = ("ductwork", "assets", "serve", "pipelines", "sandbox", "bench", "tests")
README = (Path(__file__).parent.parent / "README.md").read_text(encoding="utf-8")


def test_readme_first_screen_shows_the_demo_and_test_commands() -> None:
    first_screen = "\n".join(README.splitlines()[:15])
    assert "make demo" in first_screen
    assert "make test" in first_screen


def test_readme_settings_table_lists_every_setting_with_its_default() -> None:
    for group in ALL_GROUPS:
        for name, field in group.model_fields.items():
            row = next(
                (line for line in README.splitlines() if f"`{PREFIX}{name.upper()}`" in line), None
            )
            assert row is not None, f"{PREFIX}{name.upper()} missing from README"
            if (
                not field.is_required()
                and field.default_factory is None
                and field.default is not None
            ):
                assert f"`{field.default}`" in row


def test_every_ductwork_variable_the_code_reads_is_documented() -> None:
    """Settings, test switches and deployment variables alike: any ``DUCTWORK_*`` name in the
    code, the Makefile, CI or the deployment files appears in the README."""
    root = Path(__file__).parent.parent
    sources = [
        *(path for folder in FOLDERS for path in (root / folder).rglob("*.py")),
        *(root / "deploy").rglob("*.yaml"),
        root / "Makefile",
        *(root / ".ci").iterdir(),
    ]
    names = {
        name
        for source in sources
        for name in re.findall(r"DUCTWORK_[A-Z0-9_]*[A-Z0-9]", source.read_text(encoding="utf-8"))
    }
    assert len(names) > 20
    missing = sorted(name for name in names if f"`{name}" not in README)
    assert not missing, f"undocumented in README.md: {missing}"
