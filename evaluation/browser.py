"""Open a report in headless Chromium: the page as the browser built it, its console messages, a screenshot.

``python -m evaluation.report RUN --screenshot PNG`` and the browser test use it. Chromium (Debian's ``chromium``
package, or Google Chrome) runs as a subprocess with a fresh profile in a temporary folder; the page's timers run
for :data:`VIRTUAL_TIME_MS` of virtual time, so that its scripts finish drawing before the DOM is read. Console
messages are read from Chromium's log on standard error (``--enable-logging=stderr``): every ``console.*`` call and
every uncaught error is one ``CONSOLE`` line there.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from envs.core.errors import ConfigError
from envs.core.files import write_atomically

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
"""The executables tried, in order."""
VIRTUAL_TIME_MS = 20_000
"""Virtual time the page's timers run before the DOM is read or the screenshot taken [ms]."""
TIMEOUT_S = 180
"""Wall-clock limit of one Chromium run [s]."""
CONSOLE_LINE = re.compile(r":CONSOLE(?:\(\d+\))?:?\d*\] (.*)$")
"""A console message in Chromium's log: the message and its source follow the bracket."""


@dataclass(frozen=True)
class Page:
    """What the browser made of a page: the DOM after its scripts ran, and its console messages."""

    dom: str
    console: list[str]


def find_chromium() -> str | None:
    """The path of a Chromium or Chrome executable on PATH, or None."""
    return next((path for name in CHROMIUM_NAMES if (path := shutil.which(name))), None)


def _chromium(path: Path, *flags: str, fragment: str = "") -> subprocess.CompletedProcess[str]:
    """One headless Chromium run on the file ``path`` (with ``#fragment`` when given) with ``flags``; ConfigError
    when there is none or it fails."""
    executable = find_chromium()
    if executable is None:
        raise ConfigError(f"no Chromium found (tried {', '.join(CHROMIUM_NAMES)}): apt-get install chromium")
    with tempfile.TemporaryDirectory(prefix="gpusched-chromium-") as profile:
        command = [executable, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                   f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0",
                   f"--virtual-time-budget={VIRTUAL_TIME_MS}", *flags,
                   Path(path).resolve().as_uri() + (f"#{fragment}" if fragment else "")]
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise ConfigError(f"{path}: Chromium did not finish within {TIMEOUT_S} s") from None
    if done.returncode:
        raise ConfigError(f"{path}: Chromium exited with status {done.returncode}")
    return done


def open_page(path: Path, fragment: str = "") -> Page:
    """The DOM of the page at ``path`` (opened with ``#fragment`` when given) after its scripts ran, and every console
    message it logged."""
    done = _chromium(path, "--dump-dom", fragment=fragment)
    console = [match[1] for line in done.stderr.splitlines() if (match := CONSOLE_LINE.search(line))]
    return Page(done.stdout, console)


def screenshot(path: Path, png: Path, width_px: int = 1300, height_px: int = 2600) -> Path:
    """A PNG of the top ``width_px`` × ``height_px`` of the page at ``path``, written to ``png`` (atomically);
    returns ``png``."""
    def shoot(partial: Path) -> None:
        shot = partial.with_name(partial.name + ".png")  # Chromium picks the image type by the file's suffix
        try:
            _chromium(path, f"--window-size={width_px},{height_px}", f"--screenshot={shot.resolve()}")
            if not shot.is_file():
                raise ConfigError(f"{path}: Chromium wrote no screenshot")
            shot.replace(partial)
        finally:
            shot.unlink(missing_ok=True)

    png.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(png, shoot)
    return png
