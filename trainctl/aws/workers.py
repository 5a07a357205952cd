"""A pool of worker threads for asking AWS many things at once, that Ctrl-C does not wait on.

`with ThreadPoolExecutor() as pool:` waits for every worker on the way out, Ctrl-C included: under latency each one
still waits out its call and botocore's retries (19 to 29 s in `ls` and `plan --refresh`). Here a KeyboardInterrupt
leaves at once: queued work is cancelled, the workers' calls are abandoned, and the CLI exits without joining them
(cli/global_options.py `_exit_now`). Any other way out waits for the workers as before."""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager


@contextmanager
def interruptible_pool(max_workers: int):
    pool = ThreadPoolExecutor(max_workers=max_workers)
    try:
        yield pool
    except KeyboardInterrupt:
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown(wait=True)
