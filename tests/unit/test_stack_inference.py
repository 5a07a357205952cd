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
