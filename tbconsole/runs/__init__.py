"""Runs on disk: the run list, runs side by side (compare) and disk space."""
