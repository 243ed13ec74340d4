"""The console: a Textual app over the run's event stream (see ``tbconsole.state`` for the
state it renders). Only this package imports Textual; ``synthetic``, ``plotmath``, ``sanitize``,
``source``, ``present``, ``filters`` and ``trialfiles`` are plain Python and importable without it."""
