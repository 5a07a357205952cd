"""Text for people, below every layer that shows it: `safe.py` strips control sequences from text that came
from AWS, a job or a user's files; `logfold.py` folds a traceback into one line; `wrap.py` wraps prose at the
terminal's width without splitting a command. Pure: stdlib only, so backends, use cases and render share it."""
