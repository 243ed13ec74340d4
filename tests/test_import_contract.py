"""The core never imports Textual: runner, proxy, engine, sandbox and state work without a UI."""

import pkgutil
import subprocess
import sys

import tbconsole

UI_PACKAGES = {"tbconsole.ui", "tbconsole.app"}


def core_modules() -> list[str]:
    names = []
    for info in pkgutil.walk_packages(tbconsole.__path__, "tbconsole."):
        if any(info.name == ui or info.name.startswith(ui + ".") for ui in UI_PACKAGES):
            continue
        if info.name.endswith("__main__"):
            continue
        names.append(info.name)
    return names


def test_core_modules_do_not_import_textual():
    modules = core_modules()
    assert "tbconsole.sandbox.namespace" in modules and "tbconsole.trial" in modules
    code = (
        "import importlib, sys\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        "bad = sorted(m for m in sys.modules if m == 'textual' or m.startswith('textual.'))\n"
        "print(','.join(bad))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "", f"core imported Textual: {proc.stdout.strip()}"
