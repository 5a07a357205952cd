"""The arguments the bundled entrypoints take, with their kinds and bounds: a spec's `entrypoint.args` for a
bundled entrypoint is checked against them at plan and launch, so a typo is one line there, not a failed job."""
from __future__ import annotations

import math

from trainctl.spec.model import _clip

# The bundled entrypoints' arguments (trainctl/entrypoints/trainctl_common.py build_parser): kind and lower bound.
# A value the entrypoint would refuse after minutes of start-up is refused here, in one line, before launch.
BUNDLED_ARGS: dict[str, tuple[str, float | None]] = {
    "model": ("str", None), "num-classes": ("int", 1), "batch-size": ("int", 1), "steps": ("int", 1),
    "lr": ("float", 0), "warmup-steps": ("int", 0), "seed": ("int", 0), "device": ("str", None),
    "bf16": ("bool", None), "checkpoint-dir": ("str", None), "checkpoint-every": ("int", 0),
    "checkpoint-seconds": ("float", 0), "keep": ("int", 1), "log-every": ("int", 1), "data-dir": ("str", None),
    "data-workers": ("int", 0), "model-dir": ("str", None), "peak-tflops": ("float", 0),
    "dist-backend": ("str", None), "global-batch-size": ("int", 1),
}
# train_lm.py's own arguments (trainctl/entrypoints/trainctl_lm_args.py), on top of the shared ones.
LM_ARGS: dict[str, tuple[str, float | None]] = {
    "preset": ("str", None), "vocab-size": ("int", 1), "seq-len": ("int", 1), "layers": ("int", 1),
    "hidden": ("int", 1), "heads": ("int", 1), "ffn-hidden": ("int", 1), "grad-accum": ("int", 1),
    "sharding": ("str", None), "activation-checkpointing": ("bool", None),
    "meta-init": ("str", None), "compile": ("bool", None), "weight-decay": ("float", 0), "grad-clip": ("float", 0),
    "data-file": ("str", None), "token-dtype": ("str", None),
}


def bundled_arg_problem(key: str, value: object, bundled: str = "ddp") -> str | None:
    """Why the bundled entrypoint would refuse `--key value`, with the fix; None if it takes it."""
    name = key.replace("_", "-")
    known = {**BUNDLED_ARGS, **LM_ARGS} if bundled == "lm" else BUNDLED_ARGS
    if name not in known:
        return f"the bundled {bundled} entrypoint has no --{name}; known: {', '.join(sorted(known))}"
    kind, low = known[name]
    if kind == "bool":
        ok = isinstance(value, bool) or str(value).strip().lower() in ("true", "false", "1", "0", "yes", "no")
        return None if ok else f"--{name} takes true or false, got {_clip(value)}"
    if kind in ("int", "float"):
        try:
            number = int(str(value)) if kind == "int" and not isinstance(value, bool) else float(str(value))
        except ValueError:
            number = None
        if number is None or isinstance(value, bool) or not math.isfinite(number):
            return f"--{name} takes {'a whole number' if kind == 'int' else 'a number'}, got {_clip(value)}"
        if low is not None and number < low:
            return f"--{name} must be at least {low:g}, got {_clip(value)}"
    return None
