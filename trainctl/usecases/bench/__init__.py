"""`trainctl bench`: which layouts to measure (`measure.py`), one measuring job (`run.py`), its spec
(`spec.py`) and its recorded conditions (`record.py`)."""
