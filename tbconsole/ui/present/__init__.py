"""Presentation: how the console words and draws what it shows, as functions from the run's state
(and what ``tbconsole.ui.data`` read for a screen) to text and Rich renderables. Nothing here
opens a file or holds a widget; screens and widgets call it.

- ``wording``: labels, the header's step and progress, every help text;
- ``sanitize``: untrusted text made inert (one line, no markup);
- ``filters``: the trial grid's ``/`` filter;
- ``plotmath``: sparklines, bars and bins;
- ``trained``: whether, and with which advantage, a trial's tokens were trained on;
- ``transcript_doc``: one trial's transcript as sections of pieces;
- ``token_layout``, ``logprob_scale``: the token view's layout and its log-prob colours;
- ``group_compare``: one group's trials side by side, turn by turn;
- ``transcript_search``: matching a query against captured turns.
"""
