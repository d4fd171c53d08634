"""Files the analyst commands write where they are told: new ones only, never through a symlink.

``ductwork sql --output``, ``docs --out``, ``report --out`` and ``export --to DIR`` may run as
the service account, on a path chosen by whoever runs them. Were a symlink at that path
followed, they could overwrite the key file or ``~/.ssh/authorized_keys``. So every file is
written under a temporary name in its own folder (created exclusively, never through a
symlink) and only then given its name:

- without ``force`` by a hard link, which fails when anything at all has the name, a dangling
  symlink included, and never follows what is there;
- with ``force`` by a rename, which replaces the name itself, so it can replace a regular file
  and never write to what a symlink points to; a symlink or a folder is refused all the same.

A destination that is refused is left exactly as it was, and so is one whose write failed part
way. Folders inside an export are made and opened relative to their parent's descriptor without
following symlinks, so nothing in a folder can lead the export outside it.
"""

from __future__ import annotations

import os
import secrets
import stat
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import BinaryIO

from ductwork import file_modes

FORCE_HINT = "--force replaces a regular file"
# A folder is opened as itself or not at all: a symlink in its place fails (ENOTDIR).
FOLDER_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
TEMPORARY_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


class DestinationRefused(Exception):
    """A command will not write where it was told to; the message is one line naming the path."""


class Folder:
    """An open folder: what is made in it is made relative to its descriptor, so a folder
    swapped for a symlink after it was opened leads nowhere else."""

    def __init__(self, fd: int, shown: Path) -> None:
        self.fd = fd
        self.shown = shown  # the path messages name

    def __enter__(self) -> Folder:
        return self

    def __exit__(self, *exc_info: object) -> None:
        os.close(self.fd)

    @contextmanager
    def new_file(self, name: str, force: bool = False) -> Iterator[BinaryIO]:
        """A binary file that becomes ``name`` in this folder when the block ends without an
        error, with the data folder's file mode. An existing ``name`` is refused unless
        ``force`` and it is a regular file; a symlink or a folder is always refused."""
        shown = self.shown / _plain_name(name, self.shown)
        self._refuse_existing(name, shown, force)
        modes = file_modes.current()
        temporary = _temporary_name(name)
        try:
            fd = os.open(temporary, TEMPORARY_FLAGS, modes.file_mode, dir_fd=self.fd)
        except OSError as exc:
            raise _cannot_write(shown, exc) from None
        try:
            with os.fdopen(fd, "wb") as file:
                modes.secure_descriptor(file.fileno())
                yield file
                file.flush()
                os.fsync(file.fileno())
            self._put_in_place(temporary, name, shown, force)
            os.fsync(self.fd)
        finally:
            with suppress(FileNotFoundError):  # gone once renamed into place
                os.unlink(temporary, dir_fd=self.fd)

    def subfolder(self, name: str, force: bool = False) -> Folder:
        """Open the folder ``name`` in this one, made with the data folder's folder mode when
        missing. An existing one is used when empty, or with ``force``; a symlink or a file in
        its place is refused."""
        shown = self.shown / _plain_name(name, self.shown)
        modes = file_modes.current()
        try:
            os.mkdir(name, modes.dir_mode, dir_fd=self.fd)
            made = True
        except FileExistsError:
            made = False
        except OSError as exc:
            raise _cannot_write(shown, exc) from None
        if not made:
            try:
                found = os.stat(name, dir_fd=self.fd, follow_symlinks=False)
            except OSError as exc:  # removed meanwhile
                raise _cannot_write(shown, exc) from None
            if not stat.S_ISDIR(found.st_mode):
                raise DestinationRefused(f"{shown} is {_kind(found)}; nothing written")
        try:
            fd = os.open(name, FOLDER_FLAGS, dir_fd=self.fd)
        except OSError as exc:  # replaced meanwhile
            raise _cannot_write(shown, exc) from None
        folder = Folder(fd, shown)
        try:
            if made:
                _secure_folder(fd, modes)
            elif not force and os.listdir(fd):
                raise DestinationRefused(
                    f"{shown} is a folder that is not empty; nothing written "
                    "(--force writes into it)"
                )
        except BaseException:
            folder.__exit__()
            raise
        return folder

    def _refuse_existing(self, name: str, shown: Path, force: bool) -> None:
        try:
            found = os.stat(name, dir_fd=self.fd, follow_symlinks=False)
        except FileNotFoundError:
            return
        if not stat.S_ISREG(found.st_mode):
            raise DestinationRefused(f"{shown} is {_kind(found)}; nothing written")
        if not force:
            raise DestinationRefused(f"{shown} exists; nothing written ({FORCE_HINT})")

    def _put_in_place(self, temporary: str, name: str, shown: Path, force: bool) -> None:
        try:
            if force:
                self._refuse_existing(name, shown, force)  # what may have appeared meanwhile
                os.replace(temporary, name, src_dir_fd=self.fd, dst_dir_fd=self.fd)
            else:
                os.link(temporary, name, src_dir_fd=self.fd, dst_dir_fd=self.fd,
                        follow_symlinks=False)  # fmt: skip
        except FileExistsError:
            raise DestinationRefused(f"{shown} exists; nothing written ({FORCE_HINT})") from None
        except OSError as exc:
            raise _cannot_write(shown, exc) from None


def open_folder(path: Path) -> Folder:
    """Open an existing folder (symlinks on the way are followed: only what is written in it
    is guarded)."""
    try:
        return Folder(os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC), path)
    except OSError as exc:
        raise _cannot_write(path, exc) from None


@contextmanager
def new_file(path: Path, force: bool = False) -> Iterator[BinaryIO]:
    """A binary file that becomes ``path`` when the block ends without an error (see
    ``Folder.new_file``); its folder must exist."""
    with open_folder(path.parent) as folder, folder.new_file(path.name, force) as file:
        yield file


def new_folder(path: Path, force: bool = False) -> Folder:
    """The folder an export writes into, open: made (with any missing parents) with the data
    folder's folder mode, or an existing empty one, or with ``force`` any existing folder;
    never a symlink."""
    file_modes.current().make_private_dir(path.parent)
    with open_folder(path.parent) as parent:
        return parent.subfolder(path.name, force)


def _plain_name(name: str, where: Path) -> str:
    """``name`` if it names an entry of its folder and nothing beyond it."""
    if not name or name in {".", ".."} or "/" in name or "\0" in name:
        raise DestinationRefused(f"{name!r} in {where} is not a plain file or folder name")
    return name


def _temporary_name(name: str) -> str:
    """A hidden name beside ``name`` for the file being written, short enough for any name."""
    return f".{name[:64]}.{secrets.token_hex(6)}.partial"


def _kind(found: os.stat_result) -> str:
    if stat.S_ISLNK(found.st_mode):
        return "a symlink"
    if stat.S_ISDIR(found.st_mode):
        return "a folder"
    if stat.S_ISREG(found.st_mode):
        return "a file"
    return "no regular file"


def _cannot_write(path: Path, error: OSError) -> DestinationRefused:
    return DestinationRefused(f"cannot write {path}: {error.strerror or type(error).__name__}")


def _secure_folder(fd: int, modes: file_modes.FileModes) -> None:
    """Give a folder made here its mode and group (``mkdir`` applies the mask and may drop
    the setgid bit)."""
    if modes.gid is not None:
        os.fchown(fd, -1, modes.gid)
    os.fchmod(fd, modes.dir_mode)
