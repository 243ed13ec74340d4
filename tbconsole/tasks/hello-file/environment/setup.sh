#!/bin/bash
# Nothing to prepare: the agent starts from an empty /app.
exit 0
