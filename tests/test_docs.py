"""The README and the documentation site (``docs/``, built by mkdocs) stay true: the README's
first screen and size, a strict build of the site, the settings page as the settings model
makes it, and every command and ``DUCTWORK_*`` variable documented."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from pipelines.settings_page import PAGE, settings_page

ROOT = Path(__file__).parent.parent
FOLDERS = ("ductwork", "assets", "serve", "pipelines", "sandbox", "bench", "tests")
README = (ROOT / "README.md").read_text(encoding="utf-8")
README_MOST_LINES = 200


def documentation() -> str:
    """The README and every page of the site, as one text."""
    pages = sorted((ROOT / "docs").rglob("*.md"))
    return "\n".join([README, *(page.read_text(encoding="utf-8") for page in pages)])


def test_readme_first_screen_shows_the_demo_and_test_commands() -> None:
    first_screen = "\n".join(README.splitlines()[:15])
    assert "make demo" in first_screen
    assert "make test" in first_screen


def test_readme_fits_on_a_screen_or_two_and_links_only_to_pages_that_exist() -> None:
    assert len(README.splitlines()) < README_MOST_LINES
    links = re.findall(r"\]\((docs/[^)#]+)", README)
    assert links
    assert [link for link in links if not (ROOT / link).is_file()] == []


def test_the_site_builds_strictly(tmp_path: Path) -> None:
    """``mkdocs build --strict`` (what ``make docs`` runs): a broken link or anchor, or a page
    left out of the navigation, is a warning, and strict makes it fail."""
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},  # its banner about a next major release
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    assert (tmp_path / "settings.html").is_file()


def test_the_settings_page_is_the_one_the_settings_model_makes() -> None:
    committed = (ROOT / PAGE).read_text(encoding="utf-8")
    assert committed == settings_page(), (
        f"{PAGE} is stale: `ductwork docs --page settings --force` writes it again from "
        "ductwork/settings/"
    )


def test_every_command_is_documented() -> None:
    commands = (ROOT / "docs" / "commands.md").read_text(encoding="utf-8")
    usage = subprocess.run(
        [sys.executable, "-m", "pipelines.cli", "--help"],
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=True,
    ).stdout  # fmt: skip
    names = re.search(r"\{([a-z,-]+)\}", usage)
    assert names is not None, usage
    missing = sorted(n for n in names[1].split(",") if f"`ductwork {n}" not in commands)
    assert not missing, f"undocumented in docs/commands.md: {missing}"


def test_every_ductwork_variable_the_code_reads_is_documented() -> None:
    """Settings, test switches and deployment variables alike: any ``DUCTWORK_*`` name in the
    code, the Makefile, CI or the deployment files appears in the README or the site."""
    sources = [
        *(path for folder in FOLDERS for path in (ROOT / folder).rglob("*.py")),
        *(ROOT / "deploy").rglob("*.yaml"),
        ROOT / "Makefile",
        *(ROOT / ".ci").iterdir(),
    ]
    names = {
        name
        for source in sources
        for name in re.findall(r"DUCTWORK_[A-Z0-9_]*[A-Z0-9]", source.read_text(encoding="utf-8"))
    }
    assert len(names) > 20
    documented = documentation()
    missing = sorted(name for name in names if f"`{name}" not in documented)
    assert not missing, f"undocumented in README.md or docs/: {missing}"
