"""The README stays true: its commands and its settings table."""

from __future__ import annotations

from pathlib import Path

from ductwork.settings import ALL_GROUPS, PREFIX

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
