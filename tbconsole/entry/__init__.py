"""The composition root: the ``tbconsole`` command line and the wiring of a run (event bus,
control, console or headless progress log, the demo's local engine).

Nothing in the core (engine, sandbox, proxy, runner, events, control, state) or the console
imports this package; it imports them. One module per command; ``main`` assembles them.
"""
