"""Process-global tweaks that make the sandbox server start faster; applied before moto is imported.

moto creates a new botocore session for each backend it builds, and each session parses the same
large JSON data files again: endpoints.json (1.2 MB) and EC2's service model (4.3 MB) are each
parsed four times while EC2 starts, most of its warm-up. Here each file is parsed once per process
and shared. botocore treats loaded data as read-only; the one in-place change it makes, merging a
model's SDK extras, gives the same result when repeated.
"""
from __future__ import annotations

import threading
from typing import Any

_applied = False
_lock = threading.Lock()


def parse_botocore_files_once() -> None:
    global _applied
    from botocore.loaders import JSONFileLoader

    with _lock:
        if _applied:
            return
        original = JSONFileLoader.load_file
        cache: dict[str, Any] = {}

        def load_file(self: JSONFileLoader, file_path: str) -> Any:
            if file_path not in cache:
                cache[file_path] = original(self, file_path)
            return cache[file_path]

        JSONFileLoader.load_file = load_file
        _applied = True
