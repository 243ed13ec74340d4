"""The rewards panel's per-task table."""

import dataclasses

import pytest

from tbconsole.synthetic.run import synthetic_run

pytestmark = pytest.mark.e2e


async def test_the_rewards_table_shows_families_of_variants():
    from tbconsole.record.events import GroupStarted, TrialEnded, TrialPhaseChanged
    from tbconsole.ui.app import ConsoleApp
    from tbconsole.ui.data.source import ListSource

    from tests_support.ui import rendered, wait_for

    events = []
    for e in synthetic_run(steps=4, groups=4, group_size=2, hostile=False, error_at=None):
        if isinstance(e, (GroupStarted, TrialPhaseChanged, TrialEnded)) and getattr(e, "task", None):
            e = dataclasses.replace(e, task=f"{e.task}-{e.step:03d}")  # a variant per step
        events.append(e)
    tasks = {e.task for e in events if isinstance(e, GroupStarted)}
    families = {t.rsplit("-", 1)[0] for t in tasks}
    assert len(families) < len(tasks)
    app = ConsoleApp(source=ListSource(events), clock=lambda: events[-1].ts)
    async with app.run_test(size=(140, 50)) as pilot:
        await wait_for(pilot, lambda: app.state.events == len(events) and app.state.task_stats)
        app.redraw()
        app.tick()
        await pilot.pause()
        table = rendered(app.screen.query_one("#rewards"), 70)
    rows = table.split("family", 1)[1].splitlines()[1:]
    shown = [row.split()[0] for row in rows if row.strip() and not row.startswith("+")]
    assert shown and set(shown) <= families, table  # families, never a variant's own row
    for family in shown:
        n = sum(t.rsplit("-", 1)[0] == family for t in tasks)
        assert (f"{family} ×{n}" if n > 1 else family) in table, table
