"""Writes docs/images/ledger.svg, the docs' picture of the difficulty ledger (``D``): the console
replaying a recorded 20-step demo run of the advisory corpus, the ledger open, sorted by waste.

    .venv/bin/python tests/ui/make_ledger_picture.py
"""

import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for tests_support

from tbconsole.ui.app import ConsoleApp  # noqa: E402
from tbconsole.ui.data.source import Replay  # noqa: E402

from tests_support.paths import REPO  # noqa: E402
from tests_support.recorded import corpus_events  # noqa: E402
from tests_support.ui import T_FIXED  # noqa: E402

RUN = "healthy-multi-turn-1"
OUT = REPO / "docs" / "images" / "ledger.svg"


async def main() -> None:
    app = ConsoleApp(replay=Replay(corpus_events(RUN)), mode="replay", clock=lambda: T_FIXED)
    async with app.run_test(size=(150, 36)) as pilot:
        await pilot.pause(0.3)
        await pilot.press("D")
        await pilot.pause(0.5)
        OUT.write_text(app.export_screenshot(title=f"tbconsole · difficulty ledger · {RUN}"))
    print(OUT)


if __name__ == "__main__":
    asyncio.run(main())
