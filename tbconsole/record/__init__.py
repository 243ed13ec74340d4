"""The run's record: vocabularies, typed events, the run folder's layout, capture files, the
runner's lease, run control and notifications."""
