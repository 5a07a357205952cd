"""A launched job: `watch` (`watch.py`, reads retried in `transient.py`, `recovery.py`), `ls` (`listing.py`;
`ls --all`: `account_listing.py`), `fetch` (`fetch.py`) and the job's news (`notify.py`)."""
