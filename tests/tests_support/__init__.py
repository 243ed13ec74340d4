"""Helpers shared by the tests, one module per topic; test files import them from here, never from
another test file or a conftest (conftest files hold fixtures and hooks only).

- ``paths``: the repository's folders the tests read (the recorded runs, the advisory corpus).
- ``prereqs``: a missing prerequisite skips here and fails in CI (``missing``).
- ``waiting``: polling until a condition holds.
- ``processes``: host processes and sandbox cgroups left behind.
- ``tmux``: a tmux server of a test's own.
- ``recorded``: recorded runs (the advisory corpus, the synthetic fixtures, the session's demo run).
- ``advisories``: constructed event streams for the advisory rules and the reducer.
- ``ui``: driving the console under Textual's pilot.
- ``web``: the console served to headless Chromium.
- ``trials``: Harbor trials of hand-made tasks through the runner's ``run_group``.
- ``detached``: a runner in a process of its own.
- ``proxy``: the capture proxy with a scripted sampler.
- ``agents``: one real trial of a third-party agent.
- ``healthz``: a stand-in gateway that answers only its health check.
"""
