"""Who may read the data folder: its owner only, or its owner and one group.

The folder holds personal data (in the warehouse and its snapshots) and the API keys' hashes,
so nothing in it is readable by other local users. By default files are 0600 and folders 0700;
with ``DUCTWORK_FILE_GROUP`` set (a group name or gid), files are 0640 and folders 2750 (the
setgid bit makes every file created inside take the folder's group), so the read API or
analysts may run as other users of that group.

Two mechanisms, because ductwork is not the only writer: DuckDB, SQLite (the Dagster
instance) and Dagster itself create files of their own, with the process's file-creation mask.
So every entry point that writes data sets the mask (``apply_umask``); the files ductwork writes
itself are also given their mode explicitly (``write_private``, ``make_private_dir``), so they
stay private when the code runs as a library in a process with a looser mask. ``tighten``
brings a folder left readable (0644 files, 0755 folders: copied in, or made by hand) to the
same rule.
"""

from __future__ import annotations

import grp
import os
import stat
import uuid
from dataclasses import dataclass
from pathlib import Path

from ductwork.settings import FileSettings, SettingsError, load

SETGID = stat.S_ISGID
# In the data folder: the rule it was last tightened to, whole.
MARKER = ".file-modes"
SHALLOW_DEPTH = 2


@dataclass(frozen=True)
class FileModes:
    """The modes of the data folder's files and folders, and the group that shares them."""

    gid: int | None = None

    @classmethod
    def from_settings(cls) -> FileModes:
        """The rule ``DUCTWORK_FILE_GROUP`` asks for (a group name or a numeric gid)."""
        group = load(FileSettings).file_group
        if group is None or not group.strip():
            return cls()
        group = group.strip()
        if group.isdigit():
            return cls(int(group))
        try:
            return cls(grp.getgrnam(group).gr_gid)
        except KeyError:
            message = f"DUCTWORK_FILE_GROUP names no group on this host: {group}"
            raise SettingsError(message) from None

    @property
    def file_mode(self) -> int:
        """0600, or 0640 with a group."""
        return 0o600 if self.gid is None else 0o640

    @property
    def dir_mode(self) -> int:
        """0700, or 2750 with a group (new files inherit the folder's group)."""
        return 0o700 if self.gid is None else SETGID | 0o750

    @property
    def umask(self) -> int:
        """The file-creation mask that gives files and folders made by others these modes."""
        return 0o077 if self.gid is None else 0o027

    def apply_umask(self) -> None:
        """Set this process's file-creation mask (children inherit it)."""
        os.umask(self.umask)

    def secure(self, path: Path) -> bool:
        """Give one existing file or folder its mode (and the group); returns whether it
        changed. Symlinks are left as they are, and so are entries another user owns (only
        their owner may change them)."""
        found = path.lstat()
        if stat.S_ISLNK(found.st_mode) or not _may_change(found):
            return False
        mode = self.dir_mode if stat.S_ISDIR(found.st_mode) else self.file_mode
        changed = False
        if self.gid is not None and found.st_gid != self.gid:
            os.chown(path, -1, self.gid)  # clears the setgid bit: the mode is set after
            changed = True
        if changed or stat.S_IMODE(found.st_mode) != mode:
            os.chmod(path, mode)
            changed = True
        return changed

    def make_private_dir(self, path: Path) -> Path:
        """Create ``path`` and its missing parents with the folder mode; an existing folder
        keeps its mode unless it is one of those created."""
        missing = []
        for folder in (path, *path.parents):
            if folder.exists():
                break
            missing.append(folder)
        path.mkdir(parents=True, exist_ok=True)
        for folder in missing:
            self.secure(folder)
        return path

    def write_private(self, path: Path, data: bytes) -> None:
        """Write ``data`` to ``path`` (created or truncated) with the file mode, flushed to disk."""
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, self.file_mode)
        try:
            self.secure_descriptor(fd)
            _write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)

    def secure_descriptor(self, fd: int) -> None:
        """Give an open file the file mode and the group (a file that existed keeps its old
        mode through ``open``)."""
        if self.gid is not None:
            os.fchown(fd, -1, self.gid)
        os.fchmod(fd, self.file_mode)

    def tighten(self, root: Path, depth: int | None = None) -> int:
        """Bring ``root`` and everything under it (down to ``depth`` levels, all without one)
        to the rule; returns how many entries changed. Symlinks are not followed."""
        if not root.exists():
            return 0
        changed = self._tightened(root)
        if depth == 0:
            return changed
        try:
            entries = list(os.scandir(root))
        except OSError:  # gone meanwhile, or a folder of another user's
            return changed
        below = None if depth is None else depth - 1
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                changed += self.tighten(Path(entry.path), below)
            else:
                changed += self._tightened(Path(entry.path))
        return changed

    def rule(self) -> str:
        """The rule in one line, as the data folder's marker records it."""
        group = "-" if self.gid is None else str(self.gid)
        return f"files {self.file_mode:o} folders {self.dir_mode:o} group {group}\n"

    def _tightened(self, path: Path) -> int:
        try:
            return int(self.secure(path))
        except FileNotFoundError:  # removed meanwhile (a staging copy, a lock file)
            return 0


def _may_change(found: os.stat_result) -> bool:
    euid = os.geteuid()
    return euid == 0 or found.st_uid == euid


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def current() -> FileModes:
    """The rule from the environment (``DUCTWORK_FILE_GROUP``)."""
    return FileModes.from_settings()


def tighten_home(home: Path, modes: FileModes) -> int:
    """Tighten the data folder: all of it once per rule (a folder copied in, made by hand
    or left by another ``DUCTWORK_FILE_GROUP``, recorded by a marker in it), and after that its
    first two levels only (the warehouse, the snapshots, the key file), which is quick however
    much run history the Dagster instance keeps. Returns how many entries changed."""
    marker = home / MARKER
    try:
        done = marker.read_text(encoding="utf-8") == modes.rule()
    except FileNotFoundError:
        done = False
    if done:
        return modes.tighten(home, depth=SHALLOW_DEPTH)
    changed = modes.tighten(home)
    modes.write_private(marker, modes.rule().encode("utf-8"))
    return changed


def fsync(path: Path) -> None:
    """Flush a file, or a folder's entries (a rename into it), to disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def secure_home(home: Path) -> FileModes:
    """What every command that writes the data folder does first: set the process's mask and
    tighten what was left readable. A missing ``home`` is left to be created by
    whoever first writes it (under the mask, so privately): a command that stops before writing
    anything, such as a demo refusing a taken port, leaves nothing behind."""
    modes = current()
    modes.apply_umask()
    if home.exists():
        tighten_home(home, modes)
    return modes


def write_atomically(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` at once (written beside it, flushed, renamed), with the
    file mode; readers see the old text or the new, never part of either."""
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:6]}")
    current().write_private(tmp, text.encode("utf-8"))
    os.replace(tmp, path)
    fsync(path.parent)
