"""The main screen's panels. Each renders a ``RunState`` (``show(state, now)``); none reads
events or files itself."""
