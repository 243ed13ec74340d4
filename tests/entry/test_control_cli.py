"""`tbconsole control LOG_PATH COMMAND [ARGUMENT]`: a command reaches a live run's control inbox and
the run applies it (here: the off-policy limit lowered, recorded as an event); a usage mistake or a
run that is not live is one message and exit 2, and nothing is sent."""

from tinker_cookbook.rl.train import AsyncConfig

from tbconsole.entry.main import main
from tbconsole.record.control import ControlInbox, RunControl
from tbconsole.record.events import OffPolicyLimit
from tbconsole.record.lease import Lease
from tbconsole.runner.groupbook import GroupBook
from tbconsole.runner.offpolicy import LiveLimit
from tbconsole.runner.weights import PolicyWeights


def test_a_live_off_policy_run_gets_its_limit_lowered_from_a_shell(tmp_path, capsys):
    seen: list = []
    control = RunControl(seen.append)
    config = AsyncConfig(max_steps_off_policy=2, groups_per_batch=2)
    book = GroupBook(seen.append, lambda: 4)
    control.off_policy_limit = LiveLimit(config, book, PolicyWeights(4, 1, seen.append), seen.append).lower
    inbox = ControlInbox(tmp_path, control)  # makes the inbox, as the runner does
    with Lease(tmp_path, ["tbconsole", "train"]):
        assert main(["control", str(tmp_path), "set_max_steps_off_policy"]) == 2  # no number: nothing sent
        assert main(["control", str(tmp_path), "pause", "now"]) == 2
        assert main(["control", str(tmp_path), "set_max_steps_off_policy", "1"]) == 0
        assert inbox.poll() == 1
    assert [e for e in seen if isinstance(e, OffPolicyLimit)][-1].max_steps_off_policy == 1
    assert config.max_steps_off_policy == 1 and book.limit == 1
    err = capsys.readouterr().err
    assert "needs a whole number of updates" in err and "takes no argument" in err


def test_a_run_that_is_not_live_is_refused(tmp_path, capsys):
    with Lease(tmp_path, ["tbconsole", "train"]):
        pass  # ended
    assert main(["control", str(tmp_path), "stop"]) == 2
    assert "not live" in capsys.readouterr().err
    assert not (tmp_path / "control").exists() or not any((tmp_path / "control").rglob("*.json"))
