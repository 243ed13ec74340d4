"""The benchmarks that drive the console (`tbconsole bench console`): they start ConsoleApp, or
`tbconsole attach` on a pseudo-terminal, so they sit above the UI, in the composition root, and
not in ``tbconsole.bench`` (a layer below it).

- ``console``: events/s ingested, UI lag, memory, attach's first frame (the command's module);
- ``transcript``: a 200-turn trial's transcript, first screen and scrolling;
- ``day``: all of it on a day-long run (``--day``).
"""
