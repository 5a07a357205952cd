"""The job spec: a YAML file describing the training work, validated by pydantic v2.

`load_spec(path)` returns a `JobSpec` or raises `UsageError` with one line that names the file,
the field (and the YAML line where there is one) and the fix.
"""
from __future__ import annotations

import math
import re
from typing import Annotated, Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from trainctl.catalog.platforms import NAMES as PLATFORM_NAMES

Precision = Literal["bf16", "fp16", "fp32"]
# the registered platforms (catalog/platforms.py): a Literal built from the registry, so the schema lists them
Platform = Literal[PLATFORM_NAMES]  # type: ignore[valid-type]

# Bounds that keep every derived number finite (a spec is hostile input until validated); MAX_NODES: spec/layouts.py
MAX_SAMPLES = 10**15
MAX_SPEC_BYTES = 1024 * 1024
MAX_BATCH = 10**7  # samples per accelerator per step: far beyond any memory

# layouts, node ranges and the strict base model (spec/layouts.py); re-exported for spec/__init__.py and the loader
from trainctl.spec.layouts import (FLEXIBLE_LAYOUT_RE, LAYOUT_RE, MAX_NODES, Layout, Market, NodeRange,  # noqa: E402,F401
                                   Strict, _clip)


# ---------------------------------------------------------------- known architectures (spec/architectures.py)
from trainctl.spec.architectures import ARCHITECTURES, Architecture, Family, transformer  # noqa: E402
from trainctl.spec.data import Channel, ChannelName, _short_form, channels_problem  # noqa: E402

# ---------------------------------------------------------------- sections
RESERVED_ARG_PREFIX = "sagemaker_"  # entrypoint.args keys refused (any case, - or _): the platform's own

class Entrypoint(Strict):
    # ddp: train_ddp.py (timm ViT, GPUs); neuron: train_neuron.py (Trainium); lm: train_lm.py (LM, FSDP, GPUs)
    bundled: Literal["ddp", "neuron", "lm"] | None = None
    script: str | None = Field(None, description="the user's training script, relative to source_dir")
    source_dir: str | None = Field(None, description="directory shipped as the job's code")
    # Passed as SageMaker's training toolkit passes hyperparameters (mapping.to_cmd_args): `--key value`, keys
    # sorted, a boolean as Python spells it (`--flag True`), on SageMaker and on EC2 alike (docs/your-script.md).
    args: dict[str, str | int | float | bool] = Field(default_factory=dict)
    max_retries: int = Field(0, ge=0, le=10)  # EC2 reruns of a failed script; SageMaker never reruns one

    @field_validator("args")
    @classmethod
    def no_reserved_keys(cls, args: dict) -> dict:
        # SageMaker's training toolkit reads every `sagemaker_*` hyperparameter as its own configuration (MPI,
        # the program, the code's location): a job argument of that name would steer the platform, not the script
        for key in args:
            if key.lower().replace("-", "_").startswith(RESERVED_ARG_PREFIX):
                raise ValueError(f"argument {key[:60]!r} is reserved: SageMaker's training toolkit reads "
                                 f"{RESERVED_ARG_PREFIX}* hyperparameters as its own settings; rename it")
        return args

    @model_validator(mode="after")
    def one_kind(self) -> Entrypoint:
        if (self.bundled is None) == (self.script is None):
            raise ValueError("give either 'bundled: ddp|neuron|lm' or 'script:' (with 'source_dir:'), not both")
        if self.script is not None and self.source_dir is None:
            raise ValueError("'script:' needs 'source_dir:', the directory shipped with the job")
        return self


class Model(Strict):
    architecture: str | None = Field(None, description=f"one of: {', '.join(ARCHITECTURES)}")
    # at least 1: a model of 1e-300 parameters made a step of zero seconds (a division by zero in the planner)
    # and at most far beyond any model: 1.7e308 parameters overflowed the memory arithmetic to infinity
    params: float | None = Field(None, ge=1, le=1e15, description="parameter count, when no architecture is given")
    flops_per_sample: float | None = Field(None, ge=1, le=1e21,
                                           description="training FLOPs per sample (forward+backward)")
    activation_gib_per_sample: float | None = Field(None, ge=0, le=1e6, description="activation memory per sample")
    # A transformer of your own, by its shape (params, FLOPs and activations follow), or a Hugging Face config.json
    # of your own (read from disk by the loader, relative to the spec file; it fills these fields).
    layers: int | None = Field(None, ge=1, le=10_000, description="transformer blocks")
    hidden: int | None = Field(None, ge=1, le=1_000_000, description="model width")
    heads: int | None = Field(None, ge=1, le=10_000, description="attention heads")
    kv_heads: int | None = Field(None, ge=1, le=10_000, description="key/value heads (grouped-query attention)")
    seq_len: int | None = Field(None, ge=1, le=10_000_000, description="tokens per sample")
    vocab: int | None = Field(None, ge=1, le=100_000_000, description="vocabulary (language models)")
    ffn: int | None = Field(None, ge=1, le=10_000_000, description="MLP width (default 4 x hidden)")
    gated_mlp: bool = Field(False, description="SwiGLU/GeGLU MLP (LLaMA, Mistral, Qwen): three matrices")
    tie_embeddings: bool = Field(False, description="the output layer shares the embedding matrix")
    family: Family | None = Field(None, description="vision | language | cnn (default: language with a vocab)")
    config: str | None = Field(None, description="a Hugging Face config.json of your own, relative to the spec")
    stack: Literal["auto", "tuned", "amp", "compile"] = Field(
        "auto", description="the software stack the throughput model assumes: tuned (vendor-tuned recipes), amp "
                            "(plain PyTorch with autocast), compile (torch.compile); auto: the bundled entrypoint's "
                            "own, for your script read from its code (imports of fused kernels, torch.compile, "
                            "the Hugging Face Trainer...), else not known: the plan's band holds every stack")
    precision: Precision = "bf16"
    optimizer: Literal["adam", "adamw", "sgd", "sgd-momentum"] = "adam"
    activation_checkpointing: bool = False
    strategy: Literal["auto", "ddp", "fsdp"] = Field(
        "auto", description="ddp replicates the model on every accelerator; fsdp shards it; auto picks ddp when "
                            "it fits")
    tensor_parallel: int = Field(
        1, ge=1, le=64, description="your script's tensor-parallel degree (Megatron-LM, NeuronX Distributed): each "
                                    "layer split over this many ranks of one node, with sequence parallelism; "
                                    "strategy then says what the data-parallel groups do with the rest")

    @field_validator("architecture")
    @classmethod
    def known_architecture(cls, v: str | None) -> str | None:
        if v is not None and v not in ARCHITECTURES:
            raise ValueError(f"unknown architecture {v!r}; known: {', '.join(ARCHITECTURES)} "
                             "(or give params and flops_per_sample, or the shape: layers, hidden, heads, seq_len)")
        return v

    @model_validator(mode="after")
    def sized(self) -> Model:
        shape = [self.layers, self.hidden, self.heads, self.seq_len]
        if any(v is not None for v in shape) and not all(v is not None for v in shape):
            raise ValueError("a model given by its shape needs all of 'layers:', 'hidden:', 'heads:' and 'seq_len:'")
        if self.architecture is not None and self.layers is not None:
            raise ValueError("give 'architecture:' or the shape (layers, hidden, heads, seq_len), not both")
        if self.architecture is None and self.layers is None and (self.params is None or self.flops_per_sample is None):
            raise ValueError("give 'architecture:', the shape (layers, hidden, heads, seq_len[, vocab, ffn]), "
                             "'config:' (a Hugging Face config.json), or both 'params:' and 'flops_per_sample:'")
        if self.hidden is not None and self.hidden % self.heads:
            raise ValueError(f"hidden ({self.hidden}) is not a multiple of heads ({self.heads})")
        if self.tensor_parallel > 1:
            self._tensor_parallel_splits()
        arch = self.arch
        # the same bounds as params and flops_per_sample given directly: every derived number stays finite
        if arch is not None and not (arch.params <= 1e15 and 3 * arch.forward_flops_per_sample <= 1e21):
            raise ValueError(f"this shape makes {arch.params:.3g} parameters and {3 * arch.forward_flops_per_sample:.3g}"
                             " training FLOPs per sample, beyond any model (at most 1e15 and 1e21); check the numbers")
        return self

    def _tensor_parallel_splits(self) -> None:
        """Tensor parallelism splits a transformer's attention heads (and its MLP) between ranks."""
        tp, arch = self.tensor_parallel, self.arch
        family = arch.family if arch is not None else self.family
        if family == "cnn":
            raise ValueError(f"tensor_parallel: {tp} splits a transformer's layers; a CNN is not one (set it to 1)")
        if arch is None:
            raise ValueError(f"tensor_parallel: {tp} needs the model's shape (layers, hidden, heads, seq_len), an "
                             "architecture or a config: the plan sizes the collectives between the ranks by it")
        if arch.heads % tp:
            raise ValueError(f"tensor_parallel: {tp} must divide the attention heads ({arch.heads})")

    @property
    def arch(self) -> Architecture | None:
        if self.architecture:
            return ARCHITECTURES[self.architecture]
        if self.layers is None:
            return None
        return transformer(self.layers, self.hidden, self.heads, self.seq_len, self.vocab, self.ffn, self.kv_heads,
                           self.gated_mlp, self.tie_embeddings, self.family)

    @property
    def name(self) -> str:
        return self.architecture or f"custom-{self.param_count:.3g}"

    @property
    def param_count(self) -> float:
        return self.params if self.params is not None else self.arch.params

    @property
    def training_flops_per_sample(self) -> float:
        """Forward + backward ~ 3x forward; recomputing activations adds one more forward."""
        if self.flops_per_sample is not None:
            return self.flops_per_sample
        factor = 4.0 if self.activation_checkpointing else 3.0
        return factor * self.arch.forward_flops_per_sample


class Workload(Strict):
    samples: Annotated[int, Field(gt=0)] | None = None
    epochs: float | None = Field(None, gt=0)
    dataset_size: int | None = Field(None, gt=0)
    # at most MAX_BATCH: 2**63 passed validation and overflowed SQLite's 64-bit INTEGER in the store's query
    batch_size_per_accelerator: int = Field(gt=0, le=MAX_BATCH,
                                            description="the one batch size: the launch passes it to the bundled "
                                                        "entrypoints as --batch-size")
    data_source: Literal["auto", "device", "cpu-synthetic", "jpeg"] = Field(
        "auto", description="where samples come from, for the input-pipeline check: device (made on the "
                            "accelerator), cpu-synthetic (made by CPU workers), jpeg (decoded and augmented on the "
                            "CPU); auto: the bundled entrypoints' choice (jpeg with data-dir or the ViT with data:, "
                            "else device)")

    @model_validator(mode="after")
    def amount(self) -> Workload:
        if self.samples is None and (self.epochs is None or self.dataset_size is None):
            raise ValueError("give 'samples:' or both 'epochs:' and 'dataset_size:'")
        if self.samples is not None and self.epochs is not None:
            raise ValueError("give 'samples:' or 'epochs:' with 'dataset_size:', not both")
        if self.samples is None and not self.epochs * self.dataset_size <= MAX_SAMPLES:
            raise ValueError(f"epochs x dataset_size is more than {MAX_SAMPLES:.0e} samples; check both numbers")
        if self.samples is not None and self.samples > MAX_SAMPLES:
            raise ValueError(f"samples is more than {MAX_SAMPLES:.0e}; check the number")
        return self

    @property
    def total_samples(self) -> int:
        return self.samples if self.samples is not None else math.ceil(self.epochs * self.dataset_size)


class Candidates(Strict):
    families: list[str] = Field(default_factory=list, description="instance families, e.g. [g5, p4d, trn1]")
    layouts: list[Layout] = Field(default_factory=list, description="explicit layouts: 'g5.2xlarge:4:spot'")
    nodes: NodeRange = Field(default_factory=NodeRange)
    markets: list[Market] = Field(default_factory=lambda: ["spot", "on-demand"])
    platforms: list[Platform] = Field(default_factory=lambda: list(PLATFORM_NAMES))
    regions: list[str] = Field(default_factory=lambda: ["us-east-1", "us-west-2"])
    flexible: bool | list[list[str]] = Field(
        False, description="also plan flexible layouts (each node any of several types with the same "
                           "accelerators): true = every family's sizes that share the accelerator (g5:1xA10G), or "
                           "lists of types that may mix")

    @field_validator("layouts", mode="before")
    @classmethod
    def parse_layouts(cls, v):
        if isinstance(v, list):
            return [Layout.parse(x) if isinstance(x, str) else x for x in v]
        return v

    @field_validator("markets", "platforms", "regions")
    @classmethod
    def not_empty(cls, v):
        if not v:
            raise ValueError("must list at least one value")
        return v

    @field_validator("regions")
    @classmethod
    def region_names(cls, v: list[str]) -> list[str]:
        for r in v:
            if not re.fullmatch(r"[a-z]{2}(-gov)?-[a-z]+-\d", r):
                raise ValueError(f"{r!r} is not an AWS region name such as us-east-1")
        return v


from trainctl.spec.recovery import Constraints, Elastic  # noqa: E402


PATH_OFF = ("", "none", "null", "off", "false")


SECRET_NAME = r"^[A-Z_][A-Z0-9_]{0,63}$"
RESERVED_ENV = ("TRAINCTL_", "AWS_", "SM_", "PYTHON", "LD_", "NCCL_", "FI_")  # set by trainctl or the platform
SECRET_ARN = (r"^arn:aws[a-z-]*:(ssm:[a-z0-9-]+:[0-9]{12}:parameter/trainctl/[A-Za-z0-9_./-]{1,900}"
              r"|secretsmanager:[a-z0-9-]+:[0-9]{12}:secret:trainctl/[A-Za-z0-9_/+=.@-]{1,500})$")


class JobSpec(Strict):
    name: str = Field(pattern=r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,39}$",
                      description="letters, digits and hyphens, at most 40 characters")
    entrypoint: Entrypoint
    model: Model
    workload: Workload
    # bounded: 5e-324 samples/s made a division by zero in the planner
    throughput: dict[str, Annotated[float, Field(ge=1e-3, le=1e9)]] = Field(
        default_factory=dict,
        description="samples/s per accelerator you measured, keyed by instance type (g5.2xlarge) or accelerator "
                    "(A10G, L4, V100, A100, H100, Trainium1)")
    candidates: Candidates = Field(default_factory=Candidates)
    constraints: Constraints = Field(default_factory=Constraints)
    elastic: Elastic | None = Field(None, description="keep training on fewer nodes while a lost one is replaced")
    role: str | None = Field(None, description="SageMaker execution role ARN or name")
    # The channel for secrets (API tokens, passwords): the job reads them at start from SSM or Secrets Manager
    # into env vars; the values never pass through user data, hyperparameters, logs or trainctl itself.
    secrets: dict[Annotated[str, Field(pattern=SECRET_NAME)], Annotated[str, Field(pattern=SECRET_ARN)]] = Field(
        default_factory=dict, max_length=20,
        description="env var name -> ARN of an SSM SecureString parameter under /trainctl/ or a Secrets Manager "
                    "secret named trainctl/..., read by the job at start (docs/security.md)")

    @field_validator("secrets")
    @classmethod
    def own_names(cls, secrets: dict[str, str]) -> dict[str, str]:
        taken = [n for n in secrets if n.startswith(RESERVED_ENV) or n in ("PATH", "HOME")]
        if taken:
            raise ValueError(f"{taken[0]} is an environment variable trainctl or the platform sets; name the secret "
                             "otherwise")
        return secrets

    @field_validator("secrets")
    @classmethod
    def secrets_of_this_spec(cls, secrets: dict[str, str], info: ValidationInfo) -> dict[str, str]:
        """A job's role reads only the secrets under trainctl/<its spec's name>/: the permissions boundary matches
        them to the role's trainctl:spec tag (iam/boundary.py), so one spec's jobs never read another's."""
        spec = info.data.get("name")
        for env, arn in secrets.items():
            name = re.split(r":parameter/|:secret:", arn, maxsplit=1)[1]
            if spec and not name.startswith(f"trainctl/{spec}/"):
                kind = "SSM parameter /" if ":parameter/" in arn else "Secrets Manager secret "
                raise ValueError(f"{env}: {name} is not this spec's; a job reads only secrets named under "
                                 f"trainctl/{spec}/ (e.g. {kind}trainctl/{spec}/{name.rsplit('/', 1)[-1]}), "
                                 "docs/security.md")
        return secrets
    data: dict[ChannelName, Channel] | None = Field(
        None, max_length=20, description="input channels: NAME -> s3://bucket/prefix/, {uri, mode}, or {fsx, path}; "
                                         "`train` is required for a bundled entrypoint (spec/data.py)")

    @field_validator("data", mode="before")
    @classmethod
    def channel_short_forms(cls, data):
        return {k: _short_form(v) for k, v in data.items()} if isinstance(data, dict) else data

    @field_validator("data")
    @classmethod
    def train_channel(cls, data, info: ValidationInfo):
        if problem := data is not None and channels_problem(data, info.data.get("entrypoint")):
            raise ValueError(problem)
        return data
    distribution: Literal["torch_distributed", "smddp", "smp"] = Field(
        "torch_distributed", description="SageMaker's distributed training: torchrun with NCCL, SageMaker's data "
                                         "parallelism library (smddp) or its model parallelism library v2 (smp); "
                                         "`launch --distribution` overrides it; EC2 always runs torchrun with NCCL")

    @model_validator(mode="before")
    @classmethod
    def one_batch_size(cls, data):
        """workload.batch_size_per_accelerator is the one batch size: a bundled entrypoint gets it as --batch-size
        (a differing entrypoint arg is refused by load_spec, with its line)."""
        if not isinstance(data, dict):
            return data
        ep, work = data.get("entrypoint"), data.get("workload")
        if not (isinstance(ep, dict) and ep.get("bundled") and isinstance(work, dict)):
            return data
        args = ep.get("args") if isinstance(ep.get("args"), dict) else {}
        batch = work.get("batch_size_per_accelerator")
        if isinstance(batch, int) and not isinstance(batch, bool) and not {"batch-size", "batch_size"} & set(args):
            data = {**data, "entrypoint": {**ep, "args": {**args, "batch-size": batch}}}
        return data

    @model_validator(mode="after")
    def tensor_parallel_is_a_scripts(self) -> JobSpec:
        if self.model.tensor_parallel > 1 and self.entrypoint.bundled:
            raise ValueError(f"model.tensor_parallel: the bundled {self.entrypoint.bundled} entrypoint has no tensor "
                             "parallelism; it is for a script of your own that splits its layers (set it to 1)")
        return self

    @property
    def stack(self) -> str:
        """The software stack the throughput model assumes: the spec's, else the bundled entrypoint's own, else `auto`
        for a user's script (the plan reads it from the code where it can: perf/stack_inference.py). train_ddp.py (timm 1.0, fused attention, bf16) measured at the tuned level
        on an H100 (docs/cost-model.md); train_neuron.py is compiled whole by Neuron; train_lm.py is plain PyTorch
        FSDP, torch.compile with --compile."""
        if self.model.stack != "auto":
            return self.model.stack
        args = {k.replace("_", "-"): str(v).strip().lower() for k, v in self.entrypoint.args.items()}
        if self.entrypoint.bundled == "lm":
            return "compile" if args.get("compile") in ("true", "1", "yes") else "amp"
        if self.entrypoint.bundled in ("ddp", "neuron"):
            return "tuned"
        return "amp" if self.entrypoint.bundled else "auto"

    @property
    def input_source(self) -> str | None:
        """The data source the input-pipeline check uses (None: a user script of unknown input)."""
        chosen = self.workload.data_source
        if chosen != "auto":
            return chosen
        if self.entrypoint.bundled:
            args = {k.replace("_", "-"): v for k, v in self.entrypoint.args.items()}
            data_dir = args.get("data-dir")
            if self.data is not None and self.entrypoint.bundled in ("ddp", "neuron"):
                return "jpeg"   # the ViT scripts decode the `train` channel's images on the CPU
            return "jpeg" if data_dir is not None and str(data_dir).strip().lower() not in PATH_OFF else "device"
        arch = self.model.arch
        return "device" if arch is not None and arch.family == "language" else None


def json_schema() -> dict:
    return JobSpec.model_json_schema()

