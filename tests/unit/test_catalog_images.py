"""The images trainctl chooses, each with the date AWS stops patching it and the source of that date
(trainctl/catalog/images.py): a launch says it, and warns once an image is past it."""
from __future__ import annotations

from trainctl.backends.ec2.prepare import GPU_AMI_PARAMETER, NEURON_AMI_PARAMETER
from trainctl.catalog.images import IMAGES, SMP_IMAGE, SUPPORT, support_note, support_of

CHANGED_ON = "2026-11-25"  # the day this table was last checked against the support policies


def test_every_image_trainctl_chooses_has_a_sourced_support_row():
    chosen = [f"{repo}:{tag}" for repo, tag in IMAGES.values()] + [":".join(SMP_IMAGE), GPU_AMI_PARAMETER,
                                                                    NEURON_AMI_PARAMETER]
    for image in chosen:
        row = support_of(image)
        assert row is not None and row.source, image
    assert len({row.image for row in SUPPORT}) == len(SUPPORT)


def test_the_sagemaker_images_were_supported_when_chosen():
    for kind in ("gpu", "cpu"):
        row = support_of(":".join(IMAGES[kind]))
        assert row.end_of_patch > CHANGED_ON, row


def test_an_image_past_its_end_of_patch_gets_a_warning():
    image = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.10.0-gpu-py313-cu130-ubuntu22.04-sagemaker"
    note, past = support_note(image, "2026-11-25")
    assert not past and "until 2027-01-21" in note
    note, past = support_note(image, "2027-01-22")
    assert past and note.startswith("warning:") and "2027-01-21" in note and "--image/--ami" in note
    old_dlami = "/aws/service/deeplearning/ami/x86_64/oss-nvidia-driver-gpu-pytorch-2.7-ubuntu-22.04/latest/ami-id"
    note, past = support_note(old_dlami, "2026-11-25")
    assert past and "2026-04-23" in note
    assert not support_note("123456789012.dkr.ecr.us-east-1.amazonaws.com/mine:1", "2026-11-25")[1]


def test_no_image_trainctl_chooses_is_past_its_end_of_patch():
    # the GPU DLAMI was PyTorch 2.7 (end of patch 2026-04-23), the Neuron DLAMI the discontinued Ubuntu 22.04
    # multi-framework one, the Neuron training image Neuron SDK 2.20 on Ubuntu 20.04
    chosen = [f"{repo}:{tag}" for repo, tag in IMAGES.values()] + [GPU_AMI_PARAMETER, NEURON_AMI_PARAMETER]
    for image in chosen:
        assert not support_note(image, CHANGED_ON)[1], image
    assert "ubuntu-22.04" not in NEURON_AMI_PARAMETER and "multi-framework" not in NEURON_AMI_PARAMETER
    assert "ubuntu20.04" not in IMAGES["neuron"][1]



def test_the_neuron_image_is_the_last_that_carries_pytorch_xla_and_says_why():
    """The bundled Neuron script runs on torch_xla: Neuron 2.32 and later DLAMIs carry no torch-neuronx (XLA), the
    2.33 TorchNeuron DLAMI is another backend on Trn2/Trn3 only; the catalog keeps the SDK 2.31 image and says so."""
    row = support_of(NEURON_AMI_PARAMETER)
    assert row.toolkit == "Neuron SDK 2.31 (the last with PyTorch/XLA)"
    assert "2.32" in row.source and "TorchNeuron 2.14" in row.source and "trn1" in row.families
