"""The console served to a browser (``tbconsole attach --web``, tbconsole.entry.web): headless Chromium
opens it over a live run, the panels render in the page's terminal, and ``p`` typed there drops a
pause command into the run's control inbox."""

import json
import re
import signal
import socket
import subprocess
import sys
import time

import pytest

from tbconsole.entry.web import serve
from tbconsole.record.events import TrialEnded
from tbconsole.record.runfolder import RunFolder
from tbconsole.synthetic.run import synthetic_run, write_jsonl

from tests_support.web import TERMINAL_OPEN, chromium_path, free_port, wait_for_screen

pytestmark = pytest.mark.timeout(120)

SERVE = "import sys; from pathlib import Path; from tbconsole.entry.web import serve; "
SERVE += "sys.exit(serve(Path(sys.argv[1]), None, '127.0.0.1', int(sys.argv[2])))"


@pytest.fixture
def live_run(tmp_path, hold_lease):
    """A run going on: started, its second batch in progress, a control inbox and a live runner's lease.
    The folder's name has a space: the command served per browser session must quote it."""
    run = RunFolder(tmp_path / "live run")
    events = []
    for event in synthetic_run(steps=2, end=False, log_path=str(run.root)):
        events.append(event)
        if isinstance(event, TrialEnded) and event.step == 1:
            break
    write_jsonl(events, run.events)
    run.control_inbox.mkdir(parents=True)
    hold_lease(run.root)
    return run


@pytest.fixture
def web_console(live_run, tmp_path):
    """The console served over ``live_run``; yields its URL, then stops it with Ctrl-C (SIGINT)."""
    port = free_port()
    errors = tmp_path / "server.stderr"
    with open(errors, "w") as stderr:
        server = subprocess.Popen(
            [sys.executable, "-c", SERVE, str(live_run.root), str(port)],
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
        )
    try:
        line = server.stdout.readline()  # printed once the port listens
        url = re.search(r"http://\S+", line)
        assert url is not None and url.group() == f"http://127.0.0.1:{port}", line + errors.read_text()
        yield url.group()
        server.send_signal(signal.SIGINT)
        assert server.wait(timeout=20) == 0
        assert "Traceback" not in errors.read_text(), errors.read_text()
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()


@pytest.mark.e2e
def test_a_browser_shows_the_live_console_and_p_sends_pause(live_run, web_console):
    from playwright.sync_api import sync_playwright

    chromium = chromium_path()  # missing: a failure, not a skip
    exposed = []

    def expose_terminal(route):
        response = route.fetch()
        script, count = TERMINAL_OPEN.subn(r"this.terminal.open(\1),window.tbTerminal=this.terminal", response.text())
        exposed.append(count)
        route.fulfill(response=response, body=script)

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium)
        try:
            page = browser.new_page(viewport={"width": 1600, "height": 1000})
            # The page also asks a web-font host: keep the test off the network.
            page.route(re.compile(r"^https?://(?!127\.0\.0\.1[:/])"), lambda route: route.abort())
            page.route("**/static/js/textual.js", expose_terminal)
            page.goto(web_console)
            assert exposed == [1], "textual.js changed: find where it opens its xterm.js Terminal"
            wait_for_screen(page, "gateway", "trials", "Pause")
            page.focus("textarea.xterm-helper-textarea")  # xterm.js reads keys from here
            page.keyboard.press("p")
            deadline = time.monotonic() + 15
            while not (sent := sorted(live_run.control_inbox.glob("[!.]*.json"))) and time.monotonic() < deadline:
                time.sleep(0.1)
        finally:
            browser.close()
    assert len(sent) == 1, "no pause command reached the run's control inbox"
    assert json.loads(sent[0].read_text()) == {"command": "pause", "argument": None}


def test_a_port_in_use_is_refused_with_a_clear_message(tmp_path, capsys):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert serve(tmp_path, None, "127.0.0.1", port) == 2
    assert f"port {port} is already in use" in capsys.readouterr().err
