"""`trainctl launch`: the launch itself (`launch_job.py`), what a failed or interrupted launch leaves
(`outcomes.py`), and a running job of the same spec (`duplicates.py`)."""
