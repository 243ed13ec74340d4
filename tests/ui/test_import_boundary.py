"""The console's import boundary: its plain parts load without Textual, and `tbconsole attach`
loads the app without the heavy modules (each checked in a fresh interpreter)."""

import subprocess
import sys

import pytest

pytestmark = pytest.mark.e2e


def test_plain_parts_of_the_ui_do_not_import_textual():
    modules = [
        "tbconsole.state",
        "tbconsole.synthetic.run",
        "tbconsole.ui.present.plotmath",
        "tbconsole.ui.present.sanitize",
        "tbconsole.ui.data.source",
        "tbconsole.ui.data.trialfiles",
        "tbconsole.ui.data.captures",
        "tbconsole.ui.data.timeline",
        "tbconsole.ui.data.tokenizer",
        "tbconsole.ui.present.wording",
        "tbconsole.ui.present.filters",
    ]
    code = (
        "import importlib, sys\n"
        f"for m in {modules!r}: importlib.import_module(m)\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('textual', 'torch', 'harbor', 'tinker')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_attach_path_imports_no_heavy_modules(tmp_path):
    """`tbconsole attach` loads the app without torch, harbor, tinker, transformers, aiohttp."""
    code = (
        "import sys\n"
        "from tbconsole.entry import attach\n"
        "from tbconsole.ui.app import ConsoleApp\n"
        "from tbconsole.ui.data.source import TailSource, Replay, FileControls\n"
        "heavy = ('torch', 'harbor', 'tinker', 'tinker_cookbook', 'transformers', 'aiohttp', 'litellm', 'numpy')\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
