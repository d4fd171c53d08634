"""The files the analyst commands write, through the CLI as users run it: a new file with the
data folder's mode, never through a symlink, an existing file only with ``--force`` and only a
regular one; ``export --to DIR`` only into a new or empty folder unless forced, never through a
symlink on the way in or inside."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest

from tests.helpers.cli import ductwork
from tests.helpers.groups import a_group_to_share_with

# Each command that writes one file, and the arguments that make it write ``path``.
FILE_COMMANDS = {
    "sql csv": ["sql", "SELECT sku FROM units ORDER BY sku LIMIT 3", "--format", "csv", "--output"],
    "sql parquet": ["sql", "SELECT sku FROM units", "--format", "parquet", "--output"],
    "docs": ["docs", "--out"],
    "report": ["report", "--out"],
}
KEPT = b"what the destination held before\n"


def run(
    command: str, path: Path, home: Path, *extra: str, **env: str
) -> subprocess.CompletedProcess:
    environment = {**os.environ, "DUCTWORK_HOME": str(home), **env}
    return ductwork(*FILE_COMMANDS[command], str(path), *extra, env=environment, timeout=300)


def assert_refused(done: subprocess.CompletedProcess, phrase: str) -> None:
    """Exit code 2 and one line on stderr that names why."""
    assert done.returncode == 2, done.stdout + done.stderr[-3000:]
    assert done.stderr.startswith("ductwork: ") and done.stderr.count("\n") == 1, done.stderr
    assert phrase in done.stderr, done.stderr


def file_state(path: Path) -> tuple[bytes, int]:
    return path.read_bytes(), stat.S_IMODE(path.stat().st_mode)


def leftovers(folder: Path) -> list[str]:
    """Temporary files a write left behind."""
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".partial"))


@pytest.mark.parametrize("command", FILE_COMMANDS)
def test_a_command_never_writes_through_a_symlink_even_with_force(
    command: str, synced_home: Path, tmp_path: Path
) -> None:
    victim = tmp_path / "authorized_keys"
    victim.write_bytes(KEPT)
    victim.chmod(0o644)
    link = tmp_path / "out"
    link.symlink_to(victim)
    for extra in ([], ["--force"]):
        assert_refused(run(command, link, synced_home, *extra), f"{link} is a symlink")
        assert file_state(victim) == (KEPT, 0o644)
        assert link.is_symlink() and os.readlink(link) == str(victim)
    # A dangling symlink is the classic trap: opening it for writing would create its target.
    missing = tmp_path / "not-there-yet"
    dangling = tmp_path / "dangling"
    dangling.symlink_to(missing)
    for extra in ([], ["--force"]):
        assert_refused(run(command, dangling, synced_home, *extra), f"{dangling} is a symlink")
        assert not missing.exists()
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize("command", FILE_COMMANDS)
def test_a_command_keeps_an_existing_file_and_replaces_only_a_regular_one_with_force(
    command: str, synced_home: Path, tmp_path: Path
) -> None:
    existing = tmp_path / "existing"
    existing.write_bytes(KEPT)
    existing.chmod(0o644)
    assert_refused(run(command, existing, synced_home), f"{existing} exists")
    assert file_state(existing) == (KEPT, 0o644)
    done = run(command, existing, synced_home, "--force")
    assert done.returncode == 0, done.stderr[-3000:]
    written, mode = file_state(existing)
    assert written != KEPT and len(written) > 0
    assert mode == 0o600  # the new file's mode, not the replaced one's
    folder = tmp_path / "a-folder"
    folder.mkdir()
    assert_refused(run(command, folder, synced_home, "--force"), f"{folder} is a folder")
    assert list(folder.iterdir()) == []
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize("command", FILE_COMMANDS)
def test_a_command_creates_a_new_file_with_the_data_folders_modes(
    command: str, synced_home: Path, tmp_path: Path
) -> None:
    private = tmp_path / "private"
    done = run(command, private, synced_home)
    assert done.returncode == 0, done.stderr[-3000:]
    assert stat.S_IMODE(private.stat().st_mode) == 0o600
    group = a_group_to_share_with()
    shared = tmp_path / "shared"
    done = run(command, shared, synced_home, DUCTWORK_FILE_GROUP=group.gr_name)
    assert done.returncode == 0, done.stderr[-3000:]
    assert stat.S_IMODE(shared.stat().st_mode) == 0o640
    assert shared.stat().st_gid == group.gr_gid
    assert leftovers(tmp_path) == []


def export(target: Path, home: Path, *extra: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "DUCTWORK_HOME": str(home)}
    return ductwork("export", "--to", str(target), *extra, env=env, timeout=300)


def tree(folder: Path) -> dict[str, bytes | None]:
    """Every entry under ``folder``: a file's bytes, None for a folder or a symlink."""
    return {
        str(p.relative_to(folder)): p.read_bytes() if p.is_file() and not p.is_symlink() else None
        for p in folder.rglob("*")
    }


def test_export_refuses_a_symlinked_folder_and_a_folder_that_is_not_empty(
    synced_home: Path, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    linked = tmp_path / "linked"
    linked.symlink_to(elsewhere)
    for extra in ([], ["--force"]):
        assert_refused(export(linked, synced_home, *extra), f"{linked} is a symlink")
        assert list(elsewhere.iterdir()) == []
    full = tmp_path / "full"
    full.mkdir()
    (full / "notes.txt").write_bytes(KEPT)
    assert_refused(export(full, synced_home), f"{full} is a folder that is not empty")
    assert tree(full) == {"notes.txt": KEPT}
    a_file = tmp_path / "a-file"
    a_file.write_bytes(KEPT)
    assert_refused(export(a_file, synced_home, "--force"), f"{a_file} is a file")
    assert a_file.read_bytes() == KEPT


def test_export_writes_into_an_empty_folder_keeping_its_mode(
    synced_home: Path, tmp_path: Path
) -> None:
    empty = tmp_path / "empty"
    empty.mkdir(mode=0o750)
    empty.chmod(0o750)
    done = export(empty, synced_home)
    assert done.returncode == 0, done.stderr[-3000:]
    assert stat.S_IMODE(empty.stat().st_mode) == 0o750
    assert (empty / "manifest.json").is_file() and (empty / "leads" / "data.parquet").is_file()
    assert stat.S_IMODE((empty / "leads").stat().st_mode) == 0o700


def test_export_with_force_replaces_its_own_files_and_never_follows_a_symlink_inside(
    synced_home: Path, tmp_path: Path
) -> None:
    target = tmp_path / "export"
    done = export(target, synced_home)
    assert done.returncode == 0, done.stderr[-3000:]
    (target / "manifest.json").write_bytes(KEPT)
    (target / "notes.txt").write_bytes(KEPT)
    done = export(target, synced_home, "--force")
    assert done.returncode == 0, done.stderr[-3000:]
    assert (target / "manifest.json").read_bytes() != KEPT
    assert (target / "notes.txt").read_bytes() == KEPT  # not the export's: left alone
    # A symlink where the export writes a file, or where it makes a folder.
    victim = tmp_path / "victim"
    victim.write_bytes(KEPT)
    (target / "manifest.json").unlink()
    (target / "manifest.json").symlink_to(victim)
    assert_refused(export(target, synced_home, "--force"), "manifest.json is a symlink")
    assert victim.read_bytes() == KEPT
    (target / "manifest.json").unlink()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for path in (target / "leads").iterdir():
        path.unlink()
    (target / "leads").rmdir()
    (target / "leads").symlink_to(elsewhere)
    assert_refused(export(target, synced_home, "--force"), "leads is a symlink")
    assert list(elsewhere.iterdir()) == []
    assert leftovers(target) == [] and leftovers(victim.parent) == []
