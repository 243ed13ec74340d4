"""The console served to a browser: headless Chromium reads the page's terminal."""

import re
import shutil
import socket
import time

import pytest

# textual.js keeps its xterm.js Terminal to itself: the test's copy of the script hands it to the page.
TERMINAL_OPEN = re.compile(r"this\.terminal\.open\((\w+)\)")
SCREEN = """() => {
    const term = window.tbTerminal;
    if (!term) return "";
    const buffer = term.buffer.active, rows = [];
    for (let y = 0; y < term.rows; y++) rows.push(buffer.getLine(buffer.viewportY + y)?.translateToString(true) ?? "");
    return rows.join("\\n");
}"""


def chromium_path() -> str:
    path = shutil.which("chromium")
    if path is None:
        pytest.fail(
            "no Chromium for the browser test: install it as root with `apt-get install chromium` "
            "(scripts/bootstrap.sh does it when it runs as root)"
        )
    return path


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_for_screen(page, *words: str, timeout: float = 45.0) -> str:
    deadline = time.monotonic() + timeout
    screen = ""
    while time.monotonic() < deadline:
        screen = page.evaluate(SCREEN)
        if all(word in screen for word in words):
            return screen
        page.wait_for_timeout(100)
    raise AssertionError(f"{words} not on the page's terminal:\n{screen}")
