"""calibration.json `code_evidence`: verbatim lines of the public training scripts that produced each source's rows.

Imported by calibration_rows.py. scripts/eval_model.py writes these lines as the user's entrypoint.source_dir of each
row and plans with `model.stack: auto`, so the stack is read from the code as a plan reads it. Each excerpt names
the repository, path, commit and the commit's date; the lines are copied as they stand (indentation included) in
file order, keeping the try/except lines around guarded imports. Per source, one entry per script; `models` names the
rows' models the script ran (absent: all the source's rows). Nothing is downloaded when the JSON is written.
"""
WHY = ("Verbatim excerpts of the training scripts that produced each source's rows (repo, path, commit and its date), "
       "the lines that bear on the stack (imports, mixed precision, fused kernels and optimizers, compile and "
       "TorchScript, FSDP/DDP wrappers, trainers), with the try/except lines around guarded imports: "
       "scripts/eval_model.py writes them as the user's entrypoint.source_dir and plans with model.stack auto, so the "
       "stack is read from the code as a plan reads it. Lines only, in file order; no label. Per source, one entry per "
       "script (models: the rows' models it ran; all rows where absent).")


def script(repo, path, commit, date, lines):
    return {"repo": repo, "path": path, "commit": commit, "date": date, "lines": list(lines)}


# NVIDIA DeepLearningExamples: the same lines in NVIDIA's repository (the READMEs' rows) and in Lambda's fork (Lambda's
# benchmark ran the fork's scripts).
CONVNETS_MAIN = [
    "import torch.backends.cudnn as cudnn",
    "import torch.distributed as dist",
    "import torch.nn.parallel",
    "import torch.optim",
    "import torch.utils.data",
    "import torch.utils.data.distributed",
    "    scaler = torch.cuda.amp.GradScaler(",
]
CONVNETS_TRAINING = [
    "import torch",
    "import torch.nn as nn",
    "from torch.cuda.amp import autocast",
    "from torch.nn.parallel import DistributedDataParallel as DDP",
    "        if ts_script:",
    "            self.model = torch.jit.script(self.model)",
    "        with autocast(enabled=self.amp):",
]
APEX_HINT = "\"Please install apex from https://www.github.com/nvidia/apex to use distributed and fp16 training.\")"
RUN_SQUAD = [
    "import torch",
    "from apex import amp",
    "            try:",
    "                from apex.optimizers import FusedAdam",
    "            except ImportError:",
    "                raise ImportError(",
    "                    " + APEX_HINT,
    "        try:",
    "            from apex.parallel import DistributedDataParallel as DDP",
    "        except ImportError:",
    "            raise ImportError(",
    "                " + APEX_HINT,
]
RUN_PRETRAINING = [
    "import torch",
    "from torch.utils.data import DataLoader, RandomSampler, SequentialSampler, Dataset",
    "from torch.utils.data.distributed import DistributedSampler",
    "import torch.distributed as dist",
    "from lamb_amp_opt.fused_lamb import FusedLAMBAMP",
    "from torch.nn.parallel import DistributedDataParallel as DDP",
    "        model = torch.jit.script(model)",
    "    optimizer = FusedLAMBAMP(optimizer_grouped_parameters,",
    "    grad_scaler = torch.cuda.amp.GradScaler(init_scale=args.init_loss_scale, enabled=args.fp16)",
    "    with torch.cuda.amp.autocast(enabled=(args.fp16 and not args.allreduce_post_accumulation_fp16)) :",
]
FUSED_LAMB = [
    "import torch",
    "from apex.multi_tensor_apply import multi_tensor_applier",
    "import fused_lamb_CUDA",
]


def dle_entries(repo, commit, date, squad_models, pretraining):
    """ResNet-50 (main.py and its training loop), SQuAD fine-tuning, and, where the source has its rows, BERT
    pre-training, from one DeepLearningExamples checkout."""
    convnets, bert = "PyTorch/Classification/ConvNets/", "PyTorch/LanguageModeling/BERT/"
    out = [{"models": ["resnet50"],
            "files": [script(repo, convnets + "main.py", commit, date, CONVNETS_MAIN),
                      script(repo, convnets + "image_classification/training.py", commit, date, CONVNETS_TRAINING)]},
           {"models": squad_models, "files": [script(repo, bert + "run_squad.py", commit, date, RUN_SQUAD)]}]
    if pretraining:
        out.append({"models": ["bert-large-seq128", "bert-large-seq512"],
                    "files": [script(repo, bert + "run_pretraining.py", commit, date, RUN_PRETRAINING),
                              script(repo, bert + "lamb_amp_opt/fused_lamb/fused_lamb.py", commit, date, FUSED_LAMB)]})
    return out


TIMM_BENCHMARK = [
    "import torch",
    "import torch.nn as nn",
    "import torch.nn.parallel",
    "",
    "from timm.data import resolve_data_config",
    "from timm.models import create_model, is_model, list_models",
    "from timm.optim import create_optimizer_v2",
    "from timm.utils import setup_default_logging, set_jit_fuser, decay_batch_step, check_batch_size_retry",
    "has_apex = False",
    "try:",
    "    from apex import amp",
    "    has_apex = True",
    "except ImportError:",
    "    pass",
    "",
    "try:",
    "    from deepspeed.profiling.flops_profiler import get_model_profile",
    "    has_deepspeed_profiling = True",
    "except ImportError as e:",
    "    has_deepspeed_profiling = False",
    "try:",
    "    from functorch.compile import memory_efficient_fusion",
    "    has_functorch = True",
    "except ImportError as e:",
    "    has_functorch = False",
    "        self.amp_autocast = torch.cuda.amp.autocast if self.use_amp else suppress",
    "        if torchscript:",
    "            self.model = torch.jit.script(self.model)",
    "            with self.amp_autocast():",
    "                output = self.model(self.example_inputs)",
]
FOUNDRY = ("mosaicml/llm-foundry", "061f2c7ce64e655100286584a7629e2a09f827ba", "2023-10-17")
FOUNDRY_TRAIN = [
    "import torch",
    "from composer import Trainer",
    "from llmfoundry import (COMPOSER_MODEL_REGISTRY, ComposerHFCausalLM,",
    "    trainer = Trainer(",
    "        fsdp_config=fsdp_config,",
]
FOUNDRY_ATTENTION = [
    "    try:",
    "        from flash_attn import bert_padding, flash_attn_interface  # type: ignore # yapf: disable # isort: skip",
    "    except:",
    "        raise RuntimeError('Please install flash-attn==1.0.3.post0')",
]
NEMO_VIT = [
    "from omegaconf.omegaconf import OmegaConf",
    "",
    "from nemo.collections.nlp.parts.megatron_trainer_builder import MegatronTrainerBuilder",
    "from nemo.collections.vision.models.megatron_vit_classification_models import MegatronVitClassificationModel",
    "from nemo.core.config import hydra_runner",
    "from nemo.utils import logging",
    "from nemo.utils.exp_manager import exp_manager",
    "    trainer = MegatronTrainerBuilder(cfg).create_trainer()",
]
TITAN = ("pytorch/torchtitan", "9dec370ad26b5f8e9a7333a0e36165018262644b", "2024-12-26")
TITAN_TRAIN = [
    "import torch",
    "from torchtitan import utils",
    "from torchtitan.checkpoint import CheckpointManager, TrainState",
    "from torchtitan.config_manager import JobConfig",
]
TITAN_PARALLELIZE = [
    "import torch",
    "import torch.nn as nn",
    "",
    "from torch.distributed import DeviceMesh",
    "from torch.distributed._composable.fsdp import (",
    "    CPUOffloadPolicy,",
    "    fully_shard,",
    "    MixedPrecisionPolicy,",
    ")",
    "from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (",
    "    checkpoint_wrapper as ptd_checkpoint_wrapper,",
    ")",
    "    if job_config.training.compile:",
    "        apply_compile(model)",
    "def apply_compile(model: nn.Module):",
    "        transformer_block = torch.compile(transformer_block, fullgraph=True)",
    "        model.layers.register_module(layer_id, transformer_block)",
    "        fully_shard(",
]
NEURON_VIT = [
    "import torch",
    "import torch_xla.distributed.xla_backend",
    "import transformers",
    "from transformers import (",
    "    trainer = Trainer(",
]
NEURON_BERT = [
    "import torch",
    "import torch_xla",
    "import torch.nn as nn",
    "import torch_xla.core.xla_model as xm",
    "            with torch.autocast(enabled=flags.enable_pt_autocast, dtype=torch.bfloat16, device_type='xla'):",
]
NEURON_LLAMA = [
    "import torch",
    "import torch.distributed as dist",
    "import torch_xla.core.xla_model as xm",
    "import torch_xla.runtime as xr",
    "import torch_xla.distributed.parallel_loader as pl",
    "import torch_xla.distributed.xla_multiprocessing as xmp",
    "import neuronx_distributed as nxd",
    "from neuronx_distributed.parallel_layers import parallel_state",
    "from neuronx_distributed.parallel_layers.utils import requires_init_pg_override",
    "from neuronx_distributed.utils.adamw_fp32_optim_params import AdamW_FP32OptimParams",
    "from neuronx_distributed.utils.batch_utils import get_batch_on_this_context_parallel_rank",
    "    nxd_config = nxd.neuronx_distributed_config(",
    "        activation_checkpoint_config=CoreAttention if flags.selective_checkpoint_enabled else \"full\",",
]


def evidence():
    """The `code_evidence` object, keyed by source (the key order is the JSON's)."""
    samples = "aws-neuron/aws-neuron-samples"
    return {
        "lambda_dle_bench": dle_entries("LambdaLabsML/DeepLearningExamples", "c1781a370c8f775bb50bd742f5095e66902a0314",
                                        "2023-07-09", ["bert-large-seq384", "bert-base-seq384"], pretraining=False),
        "dle_readme": dle_entries("NVIDIA/DeepLearningExamples", "729963dd47e7c8bd462ad10bfac7a7b0b604e6dd",
                                  "2024-04-04", ["bert-large-seq384"], pretraining=True),
        "timm_rtx3090": [{"files": [script("huggingface/pytorch-image-models", "benchmark.py",
                                           "c865028c34fc05cc7deea8e753b30d8cd1952591", "2022-07-27", TIMM_BENCHMARK)]}],
        "llm_foundry_bench": [{"files": [
            script(FOUNDRY[0], "scripts/train/train.py", *FOUNDRY[1:], FOUNDRY_TRAIN),
            script(FOUNDRY[0], "llmfoundry/models/layers/attention.py", *FOUNDRY[1:], FOUNDRY_ATTENTION)]}],
        "nemo_vit_perf": [{"files": [script(
            "NVIDIA/NeMo", "examples/vision/vision_transformer/megatron_vit_classification_pretrain.py",
            "af8daedb4e214b3b16827bde947d1b6962ad9447", "2023-12-12", NEMO_VIT)]}],
        "torchtitan_bench": [{"files": [
            script(TITAN[0], "train.py", *TITAN[1:], TITAN_TRAIN),
            script(TITAN[0], "torchtitan/parallelisms/parallelize_llama.py", *TITAN[1:], TITAN_PARALLELIZE)]}],
        "neuron_trn1_vision": [{"files": [script(
            samples, "torch-neuronx/training/hf_image_classification/run_image_classification.py",
            "74278eed5f770da6dc0aacb8c82e10af30979756", "2024-07-03", NEURON_VIT)]}],
        "neuron_trn1_encoder": [{"files": [script(
            samples, "torch-neuronx/training/dp_bert_hf_pretrain/dp_bert_large_hf_pretrain_hdf5.py",
            "dd0e71f0041f9eb4a5fd3e070df5638d48a67285", "2025-05-20", NEURON_BERT)]}],
        "neuron_trn1_decoder": [{"files": [script(
            "aws-neuron/neuronx-distributed",
            "examples/training/llama/tp_zero1_llama_hf_pretrain/tp_zero1_llama_hf_pretrain.py",
            "c9ee222866916e2f2ab10be884a7ad237c7cb7f4", "2025-06-30", NEURON_LLAMA)]}],
    }
