"""Headless output written to a file: no colour codes, no library warnings (logs.log has them)."""

from __future__ import annotations

import io
import logging
import warnings

from tbconsole.runner.train import _quiet_console_logging


def test_console_handlers_drop_colours_and_warnings_and_the_file_keeps_them(tmp_path):
    console = io.StringIO()  # stdout redirected to a file: not a terminal
    colour = logging.StreamHandler(console)
    colour.setFormatter(logging.Formatter("\x1b[92m%(levelname)s\x1b[0m %(message)s"))
    library = logging.getLogger("a_library_with_its_own_handler")
    library.addHandler(colour)
    logs = logging.FileHandler(tmp_path / "logs.log")
    root = logging.getLogger()
    root.addHandler(logs)
    # An in-process run earlier in the session turned warnings capture on and pytest has since put
    # its own showwarning back: start from capture off, as a runner process does.
    logging.captureWarnings(False)
    try:
        _quiet_console_logging()
        library.warning("Provider List: \x1b[1;31mhttps://docs\x1b[0m")
        library.info("every trajectory, at info")
        with warnings.catch_warnings():
            warnings.simplefilter("always")
            warnings.warn("DEPRECATED: use the other call", FutureWarning, stacklevel=1)
    finally:
        logging.captureWarnings(False)
        library.removeHandler(colour)
        root.removeHandler(logs)
        logs.close()
    shown = console.getvalue()
    assert shown == "WARNING Provider List: https://docs\n", repr(shown)
    kept = (tmp_path / "logs.log").read_text()
    assert "DEPRECATED: use the other call" in kept
