"""`stack: auto` for a user's own script: the software stack read from the code's text.

Pure: a function over {relative path: text} (usecases/plan.py reads the files under entrypoint.source_dir). The
stacks are the calibration's (perf/compute_rate.py): `tuned` (fused kernels and vendor recipes: flash-attn,
xformers, apex's fused layers, Transformer Engine, DeepSpeed, Megatron/NeMo, MosaicML Composer, NeuronX Distributed),
`compile` (torch.compile; XLA through torch_xla or torch-neuronx, which traces and compiles the whole graph), `amp`
(plain PyTorch or the Hugging Face Trainer, with or without autocast; apex's AMP, DDP and fused optimizers, which
do what torch.cuda.amp and torch's DDP do). Code that imports none of these frameworks, or no readable code at
all, is `auto`: the model centres its prediction between the stacks and widens the band to hold them.
An import inside `try:` whose `except ImportError` handler carries on without it (timm's benchmark script:
`try: from apex import amp ... except ImportError: pass`) says that the script can use the library, not that it
ran with it: it is noted, not taken as the stack. Comments and triple-quoted strings are not code. Other findings
(FSDP, activation checkpointing, fused attention through PyTorch's scaled_dot_product_attention) are stated as
evidence; they do not change the stack.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

# (stack, what the plan says, pattern over one line of code with its comment removed). First match per rule.
RULES: tuple[tuple[str, str, re.Pattern[str]], ...] = tuple((stack, words, re.compile(pattern)) for stack, words, pattern in (
    ("tuned", "flash-attn", r"\b(import|from)\s+flash_attn\b"),
    ("tuned", "xformers", r"\b(import|from)\s+xformers\b"),
    # apex's fused model kernels are tuned; its AMP (amp.initialize), DDP and fused optimizers (the optimizer step)
    # are the mixed-precision plumbing that torch.cuda.amp and torch's DDP do: amp (below).
    ("tuned", "apex fused kernels", r"\bapex\.(normalization|contrib(?!\.optimizers)|transformer|fused_dense|mlp)\b"
                                    r"|\bfrom\s+apex\s+import\s+(normalization|contrib|transformer|fused_dense|mlp)\b"),
    ("tuned", "Transformer Engine", r"\b(import|from)\s+transformer_engine\b"),
    ("tuned", "DeepSpeed", r"\b(import|from)\s+deepspeed\b"),
    ("tuned", "Megatron / NeMo", r"\b(import|from)\s+(megatron|nemo)\b"),
    ("tuned", "MosaicML Composer / LLM Foundry", r"\b(import|from)\s+(composer|llmfoundry)\b"),
    ("tuned", "Liger kernels", r"\b(import|from)\s+liger_kernel\b"),
    ("tuned", "NeuronX Distributed", r"\b(import|from)\s+neuronx_distributed\b"),
    ("compile", "XLA (torch_xla / torch-neuronx)", r"\b(import|from)\s+(torch_xla|torch_neuronx)\b"),
    ("compile", "torch.compile", r"\btorch\.compile\s*\(|\bcompile\s*=\s*True\b|torch_compile\s*=\s*True"),
    ("amp", "the Hugging Face Trainer", r"\b(Trainer|SFTTrainer|Seq2SeqTrainer)\s*\("),
    ("amp", "Hugging Face Accelerate", r"\b(import|from)\s+accelerate\b"),
    ("amp", "PyTorch Lightning", r"\b(import|from)\s+(lightning|pytorch_lightning)\b"),
    ("amp", "autocast", r"\bautocast\s*\("),
    ("amp", "apex (AMP, DDP, fused optimizers)", r"\b(import|from)\s+apex\b"),
    ("amp", "GradScaler", r"\bGradScaler\s*\("),
    ("amp", "plain PyTorch", r"^\s*(import\s+torch\b|from\s+torch\b)"),
))
TF32_WORDS = "TF32 allowed"
# Evidence that does not change the stack, but the plan says it found it.
NOTES: tuple[tuple[str, re.Pattern[str]], ...] = tuple((words, re.compile(pattern)) for words, pattern in (
    ("FSDP", r"\bFullyShardedDataParallel\b|\bfully_shard\s*\("),
    ("DDP", r"\bDistributedDataParallel\b"),
    ("activation checkpointing", r"\bcheckpoint(_sequential)?\s*\(|gradient_checkpointing(_enable\s*\(|\s*=\s*True)"),
    ("PyTorch's fused attention (scaled_dot_product_attention)", r"\bscaled_dot_product_attention\s*\("),
    (TF32_WORDS, r"allow_tf32\s*=\s*True|set_float32_matmul_precision\s*\(\s*['\"](high|medium)"
                                   r"|\btf32\s*=\s*True"),
))
ORDER = ("tuned", "compile", "amp")   # the strongest finding decides: a fused kernel or compile beats plain PyTorch
MAX_EVIDENCE = 4


@dataclass(frozen=True)
class StackInference:
    stack: str                       # tuned | compile | amp | auto
    evidence: tuple[str, ...]        # "train.py:3 flash-attn", the strongest first
    notes: tuple[str, ...] = ()      # findings that leave the stack as it is
    files: int = 0                   # Python files read
    tf32: bool | None = None         # True where the code allows TF32; None where it does not say (upstream PyTorch
                                     # leaves matmuls in fp32 unless told)

    @property
    def checkpointing(self) -> bool:
        return any(n.endswith("activation checkpointing") for n in self.notes)

    def words(self) -> str:
        """The plan's why line: what was read and what was found."""
        if not self.files:
            return "model.stack auto: no Python file of the script could be read, the stack is not known"
        found = "; ".join(self.evidence + self.notes) or "no training framework recognised"
        if self.stack == "auto":
            return f"model.stack auto: read {self.files} Python file{'s' * (self.files > 1)}, found {found}"
        return (f"model.stack auto, taken as {self.stack} from your code ({self.files} Python "
                f"file{'s' * (self.files > 1)} read): {found}")


OPTIONAL_IMPORT = "optional import, not taken as the stack:"
_IMPORT = re.compile(r"^\s*(import|from)\s")
_HANDLER = re.compile(r"^\s*except\b(?P<what>[^:]*):")


def _indent(code: str) -> int:
    return len(code) - len(code.lstrip())


_TRIPLE = re.compile(r"\"\"\"|\'\'\'")


def _outside_strings(line: str, inside: str | None) -> tuple[str, str | None]:
    """The part of a line outside triple-quoted strings, and the quote still open at its end: a docstring that
    says "from apex.optimizers.FusedLAMB" (as timm's and Neuron's LAMB optimizers' docstrings do) is not an import."""
    code, rest = "", line
    while True:
        m = _TRIPLE.search(rest) if inside is None else (re.search(re.escape(inside), rest))
        if m is None:
            return (code + rest if inside is None else code), inside
        if inside is None:
            code, inside = code + rest[:m.start()], m.group(0)
        else:
            inside = None
        rest = rest[m.end():]


def _code_lines(text: str):
    """(line number, code) with comments and triple-quoted strings left out crudely: a '#' starts a comment."""
    inside = None
    for number, line in enumerate(text.splitlines(), 1):
        code, inside = _outside_strings(line, inside)
        code = code.split("#", 1)[0]
        if code.strip():
            yield number, code


def optional_imports(lines: list[tuple[int, str]]) -> set[int]:
    """Line numbers of imports in a `try:` body whose `except ImportError` (or bare `except`) handler does not raise:
    the script runs without the library, so the import does not say it ran with it."""
    out: set[int] = set()
    for i, (_, code) in enumerate(lines):
        if code.strip() != "try:":
            continue
        level, body, j = _indent(code), [], i + 1
        while j < len(lines) and _indent(lines[j][1]) > level:
            body.append(lines[j])
            j += 1
        handler = _HANDLER.match(lines[j][1]) if j < len(lines) and _indent(lines[j][1]) == level else None
        if handler is None or not re.fullmatch(r"\s*(\(?.*\b(ImportError|ModuleNotFoundError)\b.*)?",
                                               handler["what"].split(" as ")[0]):
            continue
        k = j + 1
        raises = False
        while k < len(lines) and _indent(lines[k][1]) > level:
            raises = raises or lines[k][1].strip().startswith("raise")
            k += 1
        if not raises:
            out |= {n for n, c in body if _IMPORT.match(c)}
    return out


def infer_stack(files: dict[str, str]) -> StackInference:
    """The stack a script's code shows, with where it shows it."""
    found: dict[str, list[str]] = {s: [] for s in ORDER}
    notes: list[str] = []
    seen_rules: set[str] = set()
    optional: list[str] = []
    for path in sorted(files):
        lines = list(_code_lines(files[path]))
        guarded = optional_imports(lines)
        for number, code in lines:
            for stack, words, pattern in RULES:
                if number in guarded and pattern.search(code):
                    optional.append(f"{path}:{number} {words}")
                elif words not in seen_rules and pattern.search(code):
                    seen_rules.add(words)
                    found[stack].append(f"{path}:{number} {words}")
            for words, pattern in NOTES:
                if words not in seen_rules and pattern.search(code):
                    seen_rules.add(words)
                    notes.append(f"{path}:{number} {words}")
    if sum(map(len, found.values())) > 1:   # `import torch` says little once anything else is found
        found["amp"] = [e for e in found["amp"] if not e.endswith(" plain PyTorch")]
    stack = next((s for s in ORDER if found[s]), "auto")
    evidence = tuple(e for s in ORDER for e in found[s])[:MAX_EVIDENCE]
    tf32 = True if any(n.endswith(TF32_WORDS) for n in notes) else None
    notes += [f"{OPTIONAL_IMPORT} {', '.join(optional)}"] if optional else []
    return StackInference(stack, evidence, tuple(notes)[:MAX_EVIDENCE], len(files), tf32)
