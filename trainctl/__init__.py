"""trainctl: plan, launch and watch deep-learning training on AWS for the fewest dollars."""

__version__ = "0.1.0"
