"""The bundled entrypoints' list of the architectures they build (architectures.txt beside this file), read
alike by the entrypoints (``import trainctl_architectures``) and by trainctl's spec loader
(``trainctl.entrypoints.trainctl_architectures``). Standard library only: the CLI imports it, never torch."""
from __future__ import annotations

import os

LIST_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "architectures.txt")


def buildable(path: str = LIST_FILE) -> dict[str, dict[str, dict[str, str]]]:
    """{entrypoint: {architecture: {argument: value}}}, in the file's order."""
    out: dict[str, dict[str, dict[str, str]]] = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            words = line.split("#", 1)[0].split()
            if not words:
                continue
            entrypoint, architecture, rest = words[0], words[1], words[2:]
            args = {rest[i].removeprefix("--"): rest[i + 1] for i in range(0, len(rest) - 1, 2)}
            out.setdefault(entrypoint, {})[architecture] = args
    return out


def model_names(entrypoint: str) -> list[str]:
    """The --model values an entrypoint builds (its argparse choices)."""
    names = [args["model"] for args in buildable().get(entrypoint, {}).values() if "model" in args]
    return list(dict.fromkeys(names))
