"""Synthetic runs: recorded-looking event streams and capture files, made up deterministically,
for tests, fixtures, `demo-events` and the benchmarks. They stand in for the runner: plain Python
(no Textual), and nothing here is imported by the runner or the console.

- ``run``: the event stream of a run (``synthetic_run``), written or played as a runner would;
- ``captures``: the capture files of its turns, in the proxy's line format.
"""
