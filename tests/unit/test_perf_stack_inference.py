"""`stack: auto` reads the user's code: the strongest finding decides (a fused kernel or vendor framework: tuned;
torch.compile: compile; plain PyTorch or the Hugging Face Trainer: amp); nothing readable: not known."""
from __future__ import annotations

import pytest

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


def test_tf32_read_from_the_code_and_fp32_rates_by_hand():
    """fp32 on an A100: the TF32 tensor cores (156 TFLOPS x the die's efficiency) where the code allows TF32; the CUDA
    cores (19.5 x the efficiency x the fitted SIMT gain, at most 19.5) where it is off; their geometric mean, with a
    band reaching both, where nothing says. A V100 has no TF32: one path, no TF32 band."""
    import math

    from trainctl import perf
    from trainctl.catalog import load_calibration, load_calibration_residuals, load_catalog
    from trainctl.perf import compute_rate, fp32_math, rate_fit

    assert infer_stack({"t.py": "torch.backends.cuda.matmul.allow_tf32 = True\n"}).tf32 is True
    assert infer_stack({"t.py": "torch.set_float32_matmul_precision('high')\n"}).tf32 is True
    assert infer_stack({"t.py": PLAIN}).tf32 is None
    cat, cal = load_catalog(), load_calibration()
    fit = rate_fit.calibrated(cat, cal, load_calibration_residuals())
    assert fit.simt_exponent > 0
    a100 = compute_rate.device_for(cat, cal, "A100")
    assert (a100.peak("fp32", True), a100.peak("fp32", False), a100.peak("bf16", None)) == (156.0, 19.5, 312.0)
    gain = (312.0 / 19.5) ** fit.simt_exponent
    assert fp32_math.simt_gain(a100.peak_tflops, fit.simt_exponent) == gain

    def shape(tf32):
        return perf.ModelShape(params=335e6, training_flops_per_sample=3 * 0.8e12, precision="fp32", optimizer="adam",
                               activation_bytes_per_sample=None, hidden=1024, tokens=384, layers=24, heads=16,
                               family="language", tf32=tf32)
    e = fit.efficiency("GA100", "language", "amp")[0] * compute_rate.knee(shape(None), fit.size_knee)
    on, off = 156.0 * e, min(19.5 * e * gain, 19.5)
    for tf32, tflops in ((True, on), (False, off), (None, math.sqrt(on * off))):
        assert compute_rate.compute_seconds(shape(tf32), a100, e / compute_rate.knee(shape(tf32), fit.size_knee),
                                            fit) == pytest.approx(3 * 0.8e12 / (tflops * 1e12))
    low, high = compute_rate.tf32_rate_span(shape(None), a100, fit)
    assert (low, high) == pytest.approx((off / math.sqrt(on * off), on / math.sqrt(on * off)))
    assert compute_rate.tf32_rate_span(shape(True), a100, fit) == (1.0, 1.0)
    v100 = compute_rate.device_for(cat, cal, "V100")
    assert compute_rate.tf32_rate_span(shape(None), v100, fit) == (1.0, 1.0)   # no TF32 on the die
    assert fp32_math.paths(v100.peak_tflops, "fp32", None, fit.simt_exponent) == (
        (15.7, (125.0 / 15.7) ** fit.simt_exponent),)


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
