"""The console: a Textual app over the run's event stream (see ``tbconsole.state`` for the
state it renders). Only this package imports Textual; ``plotmath``, ``sanitize``, ``source``,
``present``, ``filters`` and ``trialfiles`` are plain Python and importable without it."""

import os

# A lone Escape byte waits ESCDELAY ms (Textual's default: 100) to be told from the start of a key
# sequence. 25 ms is enough on local terminals and most SSH links and makes Escape answer at once;
# set ESCDELAY yourself (e.g. 100) on a slow link where arrow keys arrive as Escape.
os.environ.setdefault("ESCDELAY", "25")
