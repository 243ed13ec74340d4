"""The console: a Textual app over the run's event stream (see ``tbconsole.state`` for the
state it renders). The folder a module sits in says its layer (pyproject.toml's contracts):

- ``app`` (with ``bell`` and ``themes``): the app, its sources and controls wired in;
- ``screens``: what fills the terminal; they read disk only through ``data``;
- ``widgets``: the main screen's panels and shared pieces; they render, they never read;
- ``data``: files on disk (events, trial files, captures, the tokenizer). Plain Python;
- ``present``: state and what was read, worded and drawn as text. Mostly plain Python (the
  token view's colours use Textual's ``Color``).

Screens and widgets may not import the app: what they ask of it is declared in their own layer
(``screens/host.py``: ``ConsoleHost``; ``widgets/host.py``: ``WidgetHost``), ``ConsoleApp``
subclasses it, and ``app = getters.app(ConsoleHost)`` types their ``self.app``.
"""

import os

# A lone Escape byte waits ESCDELAY ms (Textual's default: 100) to be told from the start of a key
# sequence. 25 ms is enough on local terminals and most SSH links and makes Escape answer at once;
# set ESCDELAY yourself (e.g. 100) on a slow link where arrow keys arrive as Escape.
os.environ.setdefault("ESCDELAY", "25")
