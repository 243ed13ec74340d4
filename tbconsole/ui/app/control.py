"""The run's commands and decisions: p/s/a/d, ``x`` on a trial, the error modal, and ``q``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from textual.worker import Worker, WorkerState

from tbconsole.record.control import ControlError
from tbconsole.record.enums import ControlCommand, ControlState, RunStatus
from tbconsole.ui.data.source import Controls
from tbconsole.ui.present.sanitize import one_line
from tbconsole.ui.present.wording import runner_over
from tbconsole.ui.screens.confirm import ConfirmScreen
from tbconsole.ui.screens.decision import DecisionScreen
from tbconsole.ui.screens.host import ConsoleHost


class RunControl(ConsoleHost):
    """A base of ``ConsoleApp`` (Textual finds the actions on the app, the screens call ``send``
    and the cancel): commands go to ``controls`` (stop, abort and a trial's cancel after asking)
    and their effect comes back as events; a pending decision opens the error modal; ``q`` leaves
    an attached run, or quits, a run in this process (``work``) stopped first."""

    controls: Controls
    work_worker: Worker[Any] | None = None  # the run in this process, if any
    work_result: Any = None
    work_error: BaseException | None = None
    quit_after_run = False
    _decision_shown: Any = None  # the pending decision the modal was opened for
    tick: Callable[[], None]  # the app's

    def send(self, command: str, argument: str | None = None) -> bool:
        if runner_over(self.runner):  # a command left in a dead run's inbox would hit the run that resumes it
            self.notify("the run's runner is gone: nothing to control", title=f"{command} not sent", severity="error")
            return False
        try:
            self.controls.send(command, argument)
        except (ControlError, TimeoutError, OSError) as exc:  # its text may quote a task's name: no markup
            self.notify(one_line(exc, 300), title=f"{command} not sent", severity="error", markup=False)
            return False
        said = f"{command}{' ' + one_line(argument, 100) if argument else ''} sent ({self.controls.where})"
        self.notify(said, timeout=2, markup=False)
        return True

    def _send_if_yes(self, command: str, argument: str | None = None) -> Callable[[bool | None], None]:
        """A ``ConfirmScreen``'s callback: send ``command`` when the answer is yes."""

        def answer(ok: bool | None) -> None:
            if ok:
                self.send(command, argument)

        return answer

    def action_pause(self) -> None:
        self.send(ControlCommand.PAUSE)

    def action_resume(self) -> None:
        self.send(ControlCommand.RESUME)

    def action_stop(self) -> None:
        self.push_screen(
            ConfirmScreen(
                "Stop the run cleanly? The current batch is finished and trained, "
                "a checkpoint is saved, and the run exits.",
                yes="Stop run",
            ),
            self._send_if_yes(ControlCommand.STOP),
        )

    def action_abort(self) -> None:
        self.push_screen(
            ConfirmScreen(
                "Abort the run now? Running trials are cancelled; what was captured "
                "is kept, this batch is not trained.",
                yes="Abort run",
                variant="error",
            ),
            self._send_if_yes(ControlCommand.ABORT),
        )

    def action_decide(self) -> None:
        self.open_decision()

    def can_cancel_trial(self, trial: str | None) -> bool | None:
        """For ``x`` (a screen's check_action): False, no run to command (a replay, the runner
        gone, the run over); None, that trial has ended (or there is none); True, it can go."""
        if not (self.controllable and self.run_going):
            return False
        t = self.state.trials.get(trial or "")
        return True if t is not None and not (t.done or t.cancelled) else None

    def confirm_cancel_trial(self, trial: str) -> None:
        """``x`` on a screen that shows one trial: cancel it, after asking."""
        self.push_screen(
            ConfirmScreen(
                f"Cancel trial {trial}? Its sandbox is stopped and it is not scored. Its group "
                "fails like on any infrastructure error: you then choose Abort or Retry group.",
                yes="Cancel trial",
                no="Keep it",
                variant="error",
            ),
            self._send_if_yes(ControlCommand.CANCEL_TRIAL, trial),
        )

    # -- the off-policy limit ----------------------------------------------------------------

    def can_lower_off_policy(self) -> bool:
        """An off-policy run this console commands, not over, whose max_steps_off_policy is above 0."""
        state = self.state
        limit = state.pipeline.limit
        return bool(
            state.pipeline.off_policy
            and limit is not None
            and limit > 0
            and self.controllable
            and not state.finished
            and state.control not in (ControlState.ABORTING, ControlState.WAITING)
        )

    def lower_off_policy_limit(self) -> None:
        """Ask for a lower max_steps_off_policy, then send ``set_max_steps_off_policy N``."""
        limit = self.state.pipeline.limit
        if not self.can_lower_off_policy() or limit is None:
            why = (
                "this run is not off-policy"
                if not self.state.pipeline.off_policy
                else "max_steps_off_policy is 0 already"
                if limit == 0
                else "the run is not live here: nothing to change"
            )
            self.notify(why, severity="warning", timeout=4)
            return
        from tbconsole.ui.screens.offpolicy_limit import OffPolicyLimitScreen

        def chosen(value: int | None) -> None:
            if value is not None:
                self.send(ControlCommand.SET_MAX_STEPS_OFF_POLICY, str(value))

        self.push_screen(OffPolicyLimitScreen(limit), chosen)

    # -- the error modal -------------------------------------------------------------------

    def sync_decision(self) -> None:
        """The error modal follows the pending decision: opened as one comes (not in a replay,
        nor for a runner that is gone: ``d`` opens it there), closed when it is decided."""
        pending = self.state.pending_decision
        if pending is None:
            if isinstance(self.screen, DecisionScreen):
                self.screen.dismiss(None)
            self._decision_shown = None
            return
        if self._decision_shown is pending:
            return
        self._decision_shown = pending
        if not self.replaying and not runner_over(self.runner):
            self.open_decision()

    def open_decision(self) -> None:
        pending = self.state.pending_decision
        if pending is None or isinstance(self.screen, DecisionScreen):
            return
        can = self.controllable

        def decided(choice: str | None) -> None:
            if choice is not None:
                self.send(ControlCommand.DECIDE, choice)

        self.push_screen(DecisionScreen(pending, can_decide=can), decided)

    # -- leaving ---------------------------------------------------------------------------

    def action_leave(self) -> None:
        """Close an attached console at once: the run is another process's and goes on."""
        self.exit(0)

    def action_quit_console(self) -> None:
        """Quit. Only a run in this process (``work``) is stopped first, after asking; anything
        else (an attached console, a replay) closes at once."""
        run_going = self.work_worker is not None and self.work_worker.state in (
            WorkerState.PENDING,
            WorkerState.RUNNING,
        )
        if not run_going:
            self.exit(0)
            return
        if self.state.finished or self.state.control in (ControlState.STOPPING, ControlState.ABORTING):
            self.quit_after_run = True
            self.notify("quitting when the run has ended")
            return

        def answer(ok: bool | None) -> None:
            if ok and self.send(ControlCommand.STOP):
                self.quit_after_run = True

        self.push_screen(
            ConfirmScreen(
                "The run is still going in this process. Stop it cleanly (finish and "
                "train this batch, checkpoint) and quit when it has stopped?",
                yes="Stop and quit",
            ),
            answer,
        )

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """The run in this process ended: the console quits where asked to (or the run was
        stopped or aborted), else says so and stays."""
        if event.worker is not self.work_worker:
            return
        if event.state == WorkerState.SUCCESS:
            self.work_result = event.worker.result
        elif event.state == WorkerState.ERROR:
            self.work_error = event.worker.error
            self.notify(f"the run failed: {event.worker.error!r}", severity="error", timeout=30)
        elif event.state == WorkerState.CANCELLED:
            self.work_error = self.work_error or RuntimeError("the run was cancelled")
        if event.state in (WorkerState.SUCCESS, WorkerState.ERROR, WorkerState.CANCELLED):
            self.tick()
            if self.quit_after_run or self.state.end_status in (RunStatus.STOPPED, RunStatus.ABORTED):
                self.exit(0 if self.work_error is None else 1)
            else:
                self.notify("the run has ended: q to quit", timeout=10)
