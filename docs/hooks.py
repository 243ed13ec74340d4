"""mkdocs hooks for the docs site (registered in mkdocs.yml `hooks:`).

- The console's pictures are the snapshot tests' own SVGs (tests/ui/__snapshots__/, written and
  checked by pytest-textual-snapshot), added to the site at build time under images/screens/, so a
  picture in the docs is the screen as tested and never drifts from it. A snapshot that is gone
  fails the build.
- changelog.md is CHANGELOG.md at the repository root, the one copy of the project's history.
- `<!-- include: PATH -->` on a line of its own puts the repository file PATH there (its title
  left out, its other headings one level down), so a folder's own README.md (tbconsole/tasks/,
  examples/) is shown, not copied.
"""

from __future__ import annotations

import re
from pathlib import Path

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page

ROOT = Path(__file__).resolve().parent.parent
SNAPSHOTS = ROOT / "tests" / "ui" / "__snapshots__"

# The picture's name in the site (images/screens/NAME) -> the snapshot test's SVG.
SCREENS = {
    "main.svg": "test_ui_snapshots/test_main_screen[120x36-dark].svg",
    "main-light.svg": "test_ui_snapshots/test_main_screen[120x36-light].svg",
    "main-80x24.svg": "test_ui_snapshots/test_main_screen[80x24-dark].svg",
    "paused.svg": "test_ui_snapshots/test_paused.svg",
    "decision.svg": "test_ui_snapshots/test_error_modal.svg",
    "transcript.svg": "test_transcript_snapshots/test_transcript[dark].svg",
    "tokens.svg": "test_token_view/test_token_screen_snapshot[dark].svg",
    "timeline.svg": "test_timeline_view/test_timeline_snapshot[dark].svg",
    "group.svg": "test_group_view/test_group_screen[dark].svg",
    "find.svg": "test_find/test_find_screen[dark].svg",
    "advisories.svg": "test_advisories_view/test_advisories_screen[dark].svg",
    "ledger.svg": "test_ledger_view/test_snapshot_recorded_run[160x40].svg",
    "ledger-actions.svg": "test_ledger_view/test_snapshot_drop_and_policy_skip[160x40].svg",
    "compare.svg": "test_compare_view/test_compare_screen[120x60].svg",
}

CHANGELOG = ROOT / "CHANGELOG.md"
INCLUDE = re.compile(r"^<!-- include: (\S+) -->$", re.MULTILINE)


def on_files(files: Files, config: MkDocsConfig) -> Files:
    missing = [snapshot for snapshot in SCREENS.values() if not (SNAPSHOTS / snapshot).is_file()]
    if missing:
        raise PluginError(
            "docs/hooks.py: snapshot pictures not found under tests/ui/__snapshots__/: "
            + ", ".join(missing)
            + " (a snapshot test renamed? update SCREENS)"
        )
    for name, snapshot in SCREENS.items():
        files.append(File.generated(config, f"images/screens/{name}", abs_src_path=str(SNAPSHOTS / snapshot)))
    if not CHANGELOG.is_file():
        raise PluginError("docs/hooks.py: CHANGELOG.md not found at the repository root")
    files.append(File.generated(config, "changelog.md", content=CHANGELOG.read_text(encoding="utf-8")))
    return files


def _included(match: re.Match[str]) -> str:
    path = (ROOT / match.group(1)).resolve()
    if ROOT not in path.parents or not path.is_file():
        raise PluginError(f"docs/hooks.py: cannot include {match.group(1)}: no such file in the repository")
    lines = path.read_text(encoding="utf-8").splitlines()
    if lines and lines[0].startswith("# "):
        lines = lines[1:]  # the page names it already
    fenced = False
    for i, line in enumerate(lines):
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and line.startswith("#"):
            lines[i] = "#" + line
    return "\n".join(lines)


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    return INCLUDE.sub(_included, markdown)
