"""Headless Chromium for tests that look at a page the way a person would."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

# Flags that keep Chromium off the network (this machine has none) and quiet as root.
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
)


def chromium() -> str:
    """The Chromium binary; ``make test`` installs Debian's package when it is missing.

    Fails, never skips, without it: a browser test that did not run proves nothing.
    """
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        raise RuntimeError("chromium is not installed: apt-get install chromium (make test does)")
    return found


def _run(url: str, *extra: str, wait_ms: int, timeout_s: float) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory(prefix="chromium-") as profile:
        return subprocess.run(
            [chromium(), *FLAGS, f"--user-data-dir={profile}",
             f"--virtual-time-budget={wait_ms}", *extra, url],
            capture_output=True, text=True, timeout=timeout_s, check=False,
        )  # fmt: skip


def rendered_dom(
    url: str, *, size: str = "1600,1000", wait_ms: int = 10_000, timeout_s: float = 90.0
) -> str:
    """The page's DOM after its scripts ran (up to ``wait_ms`` of virtual time).

    ``size`` matters for pages that render only the rows in view.
    """
    done = _run(url, "--dump-dom", f"--window-size={size}", wait_ms=wait_ms, timeout_s=timeout_s)
    if done.returncode != 0:
        raise RuntimeError(f"chromium failed on {url}: {done.stderr[-2000:]}")
    return done.stdout


def screenshot(
    url: str, out: Path, *, size: str = "1600,1000", wait_ms: int = 10_000, timeout_s: float = 90.0
) -> Path:
    """Save a PNG of the rendered page to ``out``."""
    done = _run(
        url, f"--screenshot={out}", f"--window-size={size}", wait_ms=wait_ms, timeout_s=timeout_s
    )
    if done.returncode != 0 or not out.exists():
        raise RuntimeError(f"chromium could not screenshot {url}: {done.stderr[-2000:]}")
    return out
