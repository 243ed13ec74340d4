"""The gateway panel's status line tells a starting gateway (healthz 503 before the run, waited
for) from one that is down, and says when an outage is being ridden out — from the events, through
the reducer, as live, attach and replay see them."""

from tbconsole.record.events import GatewayHealth
from tbconsole.state import RunState, reduce
from tbconsole.ui.widgets.base import Palette
from tbconsole.ui.widgets.gateway import _trouble

P = Palette("primary", "accent", "success", "warning", "error", "fg", "muted", "line", "bar")


def status_after(*events: GatewayHealth, now: float) -> str:
    state = RunState()
    for event in events:
        reduce(state, event)
    return _trouble(state.gateway, now, P).plain


def test_starting_down_riding_out_and_restarting_read_apart():
    starting = GatewayHealth(ts=100, base_url="http://gw", ok=False, latency_ms=2, error="starting: 503",
                             starting=True)  # fmt: skip
    assert status_after(starting, now=130) == "◐ starting"
    down = GatewayHealth(ts=200, base_url="http://gw", ok=False, latency_ms=None, error="no answer within 3 s",
                         down_since=190, outage_limit_s=600)  # fmt: skip
    assert status_after(starting, down, now=235) == "● down for 45s, retrying (up to 10m00s)"
    restarting = GatewayHealth(ts=200, base_url="http://gw", ok=False, latency_ms=3, error="starting: 503",
                               starting=True, down_since=190, outage_limit_s=600)  # fmt: skip
    assert status_after(restarting, now=200).startswith("● restarting for 10s, retrying")
    unbounded = GatewayHealth(ts=200, base_url="http://gw", ok=False, latency_ms=None, error="refused")
    assert status_after(unbounded, now=200) == "● down"
