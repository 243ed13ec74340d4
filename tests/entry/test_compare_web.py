"""`tbconsole compare A B --web`: the compare screen served to a browser through the console's own
web server (tbconsole.entry.web): headless Chromium opens it and the comparison renders in the
page's terminal (the browser session's stdout is a pipe, yet it gets the screen, not --text)."""

import gzip
import json
import re
import signal
import subprocess
import sys

import pytest

from tests_support.paths import CORPUS
from tests_support.web import TERMINAL_OPEN, chromium_path, free_port, wait_for_screen

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]


def test_a_browser_shows_the_comparison(tmp_path):
    from playwright.sync_api import sync_playwright

    chromium = chromium_path()  # missing: a failure, not a skip
    folders = []
    for name in ("healthy-demo-1", "healthy-multi-turn-1"):
        with gzip.open(CORPUS / f"{name}.jsonl.gz", "rt") as f:
            lines = [line for line in f if "kind" in json.loads(line)]
        (tmp_path / name).mkdir()
        (tmp_path / name / "events.jsonl").write_text("".join(lines))
        folders.append(str(tmp_path / name))
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "tbconsole", "compare", *folders, "--web", "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = server.stdout.readline()  # printed once the port listens
        assert line.startswith("tbconsole compare: serving ") and f"http://127.0.0.1:{port}" in line, line

        def expose_terminal(route):
            response = route.fetch()
            script = TERMINAL_OPEN.sub(r"this.terminal.open(\1),window.tbTerminal=this.terminal", response.text())
            route.fulfill(response=response, body=script)

        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=chromium)
            try:
                page = browser.new_page(viewport={"width": 1600, "height": 1000})
                page.route(re.compile(r"^https?://(?!127\.0\.0\.1[:/])"), lambda route: route.abort())
                page.route("**/static/js/textual.js", expose_terminal)
                page.goto(f"http://127.0.0.1:{port}")
                screen = wait_for_screen(page, "tbconsole compare", "training reward", "0.875 @15", "0.75 @19")
            finally:
                browser.close()
        assert "healthy-multi-turn-1" in screen and "none is live" in screen
        server.send_signal(signal.SIGINT)
        assert server.wait(timeout=20) == 0
        assert "Traceback" not in server.stderr.read()
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
