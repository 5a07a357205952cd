"""`stack: auto` reads the user's code: the strongest finding decides (a fused kernel or vendor framework: tuned;
torch.compile: compile; plain PyTorch or the Hugging Face Trainer: amp); nothing readable: not known."""
from __future__ import annotations

from trainctl.perf.stack_inference import infer_stack

PLAIN = "import torch\nfrom torch.nn.parallel import DistributedDataParallel as DDP\nmodel = DDP(model)\n" \
        "with torch.autocast('cuda', dtype=torch.bfloat16):\n    loss = model(x)\n"


def test_fused_kernels_make_it_tuned_and_say_where():
    found = infer_stack({"train.py": PLAIN, "model/attn.py": "from flash_attn import flash_attn_func\n"})
    assert found.stack == "tuned"
    assert found.evidence[0] == "model/attn.py:1 flash-attn"
    assert "train.py:4 autocast" in found.evidence
    assert "train.py:2 DDP" in found.notes
    assert "taken as tuned from your code (2 Python files read): model/attn.py:1 flash-attn" in found.words()


def test_compile_beats_plain_pytorch_and_fsdp_checkpointing_are_noted():
    code = PLAIN + "from torch.distributed.fsdp import FullyShardedDataParallel\nmodel = torch.compile(model)\n" \
                   "model.gradient_checkpointing_enable()\n"
    found = infer_stack({"train.py": code})
    assert found.stack == "compile" and found.evidence[0] == "train.py:7 torch.compile"
    assert found.checkpointing and any(n.endswith("FSDP") for n in found.notes)


def test_hugging_face_trainer_is_amp_and_comments_do_not_count():
    code = "# import deepspeed  (not used)\n# model = torch.compile(model)\nfrom transformers import Trainer\n" \
           "trainer = Trainer(model=model, args=args)\n"
    found = infer_stack({"run.py": code})
    assert found.stack == "amp" and found.evidence == ("run.py:4 the Hugging Face Trainer",)


def test_nothing_readable_or_no_framework_is_not_known():
    assert infer_stack({}).stack == "auto"
    assert "no Python file of the script could be read" in infer_stack({}).words()
    found = infer_stack({"train.py": "import jax\nprint('hello')\n"})
    assert found.stack == "auto" and "no training framework recognised" in found.words()


def test_tf32_read_from_the_code_and_fp32_peaks_by_hand():
    """fp32 on an A100: the TF32 peak (156) where the code allows TF32, the fp32 peak (19.5) where it is off, their
    geometric mean (55.2) with a band factor of sqrt(156/19.5) = 2.83 each way where nothing says."""
    import math

    from trainctl.catalog import load_calibration, load_catalog
    from trainctl.perf import compute_rate

    assert infer_stack({"t.py": "torch.backends.cuda.matmul.allow_tf32 = True\n"}).tf32 is True
    assert infer_stack({"t.py": "torch.set_float32_matmul_precision('high')\n"}).tf32 is True
    assert infer_stack({"t.py": PLAIN}).tf32 is None
    a100 = compute_rate.device_for(load_catalog(), load_calibration(), "A100")
    assert (a100.peak("fp32", True), a100.peak("fp32", False), a100.peak("bf16", None)) == (156.0, 19.5, 312.0)
    assert a100.peak("fp32", None) == math.sqrt(156.0 * 19.5)
    low, high = a100.tf32_span("fp32", None)
    assert high == 1 / low == math.sqrt(156.0 / 19.5) and a100.tf32_span("fp32", True) == (1.0, 1.0)
    v100 = compute_rate.device_for(load_catalog(), load_calibration(), "V100")
    assert v100.peak("fp32", None) == 15.7 and v100.tf32_span("fp32", None) == (1.0, 1.0)   # no TF32 on the die


def test_an_import_that_the_script_runs_without_is_noted_not_taken_as_the_stack():
    """`try: import X / except ImportError: pass` (or a fallback): the script can use X, the import does not say it
    ran with it. Where the handler raises, X is required and counts."""
    optional = "import torch\ntry:\n    import deepspeed\n    HAS_DS = True\nexcept ImportError as e:\n" \
               "    HAS_DS = False\nwith torch.autocast('cuda'):\n    loss = model(x)\n"
    found = infer_stack({"bench.py": optional})
    assert found.stack == "amp" and found.evidence == ("bench.py:7 autocast",)
    assert any("optional import" in n and "bench.py:3 DeepSpeed" in n for n in found.notes)
    required = optional.replace("    HAS_DS = False\n", "    raise SystemExit('install deepspeed')\n")
    assert infer_stack({"bench.py": required}).stack == "tuned"
    apex_amp = optional.replace("import deepspeed", "from apex import amp")   # optional, though amp-level
    assert not any("apex" in e for e in infer_stack({"bench.py": apex_amp}).evidence)
    broad = optional.replace("except ImportError as e:", "except Exception:")   # not about a missing module
    assert infer_stack({"bench.py": broad}).stack == "tuned"


def test_apex_mixed_precision_and_optimizers_are_amp_its_fused_layers_tuned():
    assert infer_stack({"t.py": "from apex import amp\nmodel, opt = amp.initialize(model, opt)\n"}).stack == "amp"
    assert infer_stack({"t.py": "from apex.optimizers import FusedAdam\n"}).stack == "amp"
    assert infer_stack({"t.py": "from apex.parallel import DistributedDataParallel\n"}).stack == "amp"
    assert infer_stack({"t.py": "from apex.normalization import FusedLayerNorm\n"}).stack == "tuned"
    assert infer_stack({"t.py": "import apex\nnorm = apex.normalization.FusedLayerNorm(1024)\n"}).stack == "tuned"


def test_text_in_docstrings_is_not_code():
    doc = '"""A LAMB written in plain PyTorch,\nported from apex.optimizers.FusedLAMB; see also\nfrom apex import ' \
          'amp\n"""\nimport torch\n\'\'\'one line: import deepspeed\'\'\'\n'
    found = infer_stack({"lamb.py": doc})
    assert found.stack == "amp" and found.evidence == ("lamb.py:5 plain PyTorch",)


def test_xla_compiles_the_graph_and_neuronx_distributed_is_a_vendor_recipe():
    xla = "import torch\nimport torch_xla.core.xla_model as xm\n"
    assert infer_stack({"t.py": xla}).stack == "compile"
    assert infer_stack({"t.py": xla + "import neuronx_distributed as nxd\n"}).stack == "tuned"
