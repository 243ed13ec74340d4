"""The headless progress log's lines for the off-policy mode: a dropped group says why and what it
cost, the staleness limit says when it changed, an update's line its share of stale tokens."""

import io

from tbconsole.record import events as ev
from tbconsole.runner.progress import ProgressLog


def lines(*events) -> list[str]:
    out = io.StringIO()
    log = ProgressLog(out)
    for event in events:
        log(event)
    return [line.split("  ", 1)[1] for line in out.getvalue().splitlines()]


def test_off_policy_lines():
    assert lines(
        ev.GroupDropped(step=3, group=1, reason="stale", weights=[1, 2], update=4, trials=8, sandbox_seconds=1500),
        ev.OffPolicyLimit(max_steps_off_policy=1, from_update=6, by="console"),
        ev.StepMetrics(step=4, metrics={"env/all/reward/total": 0.5, "offpolicy/stale_token_share": 0.25}),
    ) == [
        "step 3 group 1: dropped, too stale for max_steps_off_policy (sampled with update 1–2, update 4 reached)"
        " — 8 trials, 25m00s of sandbox time untrained",
        "off-policy: max_steps_off_policy 1 from update 6 (lowered by console)",
        "step 4 trained: reward 0.5, stale tokens 25%",
    ]
