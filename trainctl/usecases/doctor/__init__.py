"""`trainctl doctor`: the checks (`checks.py`) and the cost allocation tag (`costs.py`)."""
