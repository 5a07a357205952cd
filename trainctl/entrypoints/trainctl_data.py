"""The job's input channel as the bundled scripts read it: where the `train` channel is, and image datasets that
are either a folder of class sub-folders (JPEG/PNG) or WebDataset-style .tar shards.

Plain module beside the scripts (``import trainctl_data``); torch, torchvision and PIL only.
"""

from __future__ import annotations

import io
import json
import os
import tarfile
from typing import Any, Callable

# SageMaker mounts channel NAME at /opt/ml/input/data/NAME and names it in SM_CHANNEL_NAME; trainctl's EC2 agent puts
# it at the same path (spec/data.py channel_path), so a script finds it the same way on both platforms.
CHANNEL_ROOT = "/opt/ml/input/data"
# SageMaker describes the channels to the container in inputdataconfig.json under /opt/ml/input/config, and its
# training toolkit passes the same document as $SM_INPUT_DATA_CONFIG and the folder as $SM_INPUT_CONFIG_DIR
# (sagemaker-training-toolkit environment.py); trainctl's EC2 agent writes both the same way (bootstrap/channels.py).
INPUT_CONFIG_DIR = "/opt/ml/input/config"
INPUT_DATA_CONFIG = "inputdataconfig.json"
SHARDED_BY_KEY = "ShardedByS3Key"   # a channel's S3DistributionType when each host holds only its share of the objects
IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png")
LABEL_EXTENSION = ".cls"   # WebDataset's convention: KEY.cls holds the class index as text


def non_empty_dir(path: str) -> bool:
    try:
        with os.scandir(path) as entries:
            return any(True for _ in entries)
    except OSError:
        return False


def train_channel(env: dict[str, str], root: str = CHANNEL_ROOT) -> str | None:
    """The `train` channel's folder: $SM_CHANNEL_TRAIN, else /opt/ml/input/data/train when it exists and holds
    something; None: no channel (the scripts then generate their data)."""
    named = env.get("SM_CHANNEL_TRAIN")
    if named:
        return named
    path = os.path.join(root, "train")
    return path if non_empty_dir(path) else None


def input_data_config(env: dict[str, str]) -> dict:
    """The channels as the platform describes them: $SM_INPUT_DATA_CONFIG, else inputdataconfig.json in
    $SM_INPUT_CONFIG_DIR (or /opt/ml/input/config); {} where there is neither (a local run)."""
    raw = env.get("SM_INPUT_DATA_CONFIG")
    if raw is None:
        path = os.path.join(env.get("SM_INPUT_CONFIG_DIR") or INPUT_CONFIG_DIR, INPUT_DATA_CONFIG)
        try:
            with open(path) as handle:
                raw = handle.read()
        except OSError:
            return {}
    try:
        config = json.loads(raw)
    except ValueError:
        raise SystemExit(f"trainctl: the input data config ({raw[:60]!r}) is not JSON") from None
    return config if isinstance(config, dict) else {}


def train_channel_sharded(env: dict[str, str], data_dir: str | None) -> bool:
    """True when `data_dir` is the `train` channel and the platform gave each host only its share of its objects
    (S3DistributionType ShardedByS3Key: SageMaker's, or trainctl's EC2 agent's `sharded` mode)."""
    channel = train_channel(env)
    if not data_dir or not channel or os.path.realpath(data_dir) != os.path.realpath(channel):
        return False
    return (input_data_config(env).get("train") or {}).get("S3DistributionType") == SHARDED_BY_KEY


def tar_shards(root: str) -> list[str]:
    """The .tar shards directly in `root`, in name order (the order every rank and every restart sees)."""
    return sorted(os.path.join(root, name) for name in os.listdir(root) if name.endswith(".tar"))


class TarShardImages:
    """WebDataset-style shards read by random access: each sample is KEY.jpg|.jpeg|.png with KEY.cls (its class
    index as text) in one shard. The index (shard, offset, size, label) is built once, in shard and member order, so
    sample i is the same on every rank and after every restart, and the epoch sampler can permute it."""

    def __init__(self, shards: list[str], transform: Callable[[Any], Any]) -> None:
        self.transform = transform
        self.samples: list[tuple[str, int, int, int]] = []
        for shard in shards:
            self.samples.extend(_index_shard(shard))
        if not self.samples:
            raise SystemExit(f"trainctl: no KEY.jpg/.png with KEY.cls in the shards {shards[:3]}")
        self.num_classes = 1 + max(label for *_, label in self.samples)

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, index: int):
        from PIL import Image

        shard, offset, size, label = self.samples[index]
        with open(shard, "rb") as handle:
            handle.seek(offset)
            data = handle.read(size)
        image = Image.open(io.BytesIO(data)).convert("RGB")
        return self.transform(image), label


def _index_shard(shard: str) -> list[tuple[str, int, int, int]]:
    images: dict[str, tuple[int, int]] = {}
    labels: dict[str, int] = {}
    order: list[str] = []
    with tarfile.open(shard, "r:") as tar:
        for member in tar:
            if not member.isfile():
                continue
            key, ext = os.path.splitext(member.name)
            ext = ext.lower()
            if ext in IMAGE_EXTENSIONS:
                images[key] = (member.offset_data, member.size)
                order.append(key)
            elif ext == LABEL_EXTENSION:
                labels[key] = int(tar.extractfile(member).read().decode().strip())
    missing = [key for key in order if key not in labels]
    if missing:
        raise SystemExit(f"trainctl: {shard}: {missing[0]}{LABEL_EXTENSION} missing (every image needs its class)")
    return [(shard, *images[key], labels[key]) for key in order]


def open_images(root: str, transform: Callable[[Any], Any], classes: list[str] | None = None):
    """(dataset, number of classes, what it is) for the channel's folder: .tar shards when it holds any, else an
    image folder with one sub-folder per class. `classes`: every class folder of the job, when this host holds
    only a share of them (a sharded channel): the labels are then the job's, not this folder's."""
    shards = tar_shards(root)
    if shards:
        data = TarShardImages(shards, transform)
        return data, data.num_classes, f"{len(shards)} tar shards"
    from torchvision import datasets

    data = datasets.ImageFolder(root, transform=transform, allow_empty=classes is not None)
    if classes is not None:   # this host's labels -> the job's (a plain ImageFolder still: DataLoader workers pickle it)
        job_index = {name: index for index, name in enumerate(classes)}
        remap = [job_index[name] for name in data.classes]
        data.samples = [(path, remap[label]) for path, label in data.samples]
        data.imgs, data.targets = data.samples, [label for _, label in data.samples]
        data.classes, data.class_to_idx = list(classes), job_index
    return data, len(data.classes), "image folder"


def folder_classes(root: str) -> list[str] | int:
    """The class folders' names of an image folder, or the number of classes of .tar shards (their labels)."""
    shards = tar_shards(root)
    if shards:
        return 1 + max(label for shard in shards for *_, label in _index_shard(shard))
    from torchvision import datasets

    return datasets.folder.find_classes(root)[0]


def job_classes(per_host: list[list[str] | int]) -> list[str] | int:
    """Every host's classes together (a sharded channel gives each host only some of the files): the union of the
    class folders, in name order, so a label means the same class on every host; or the largest shard label + 1."""
    if all(isinstance(found, int) for found in per_host):
        return max(per_host)
    if any(isinstance(found, int) for found in per_host):
        raise SystemExit("trainctl: some hosts hold .tar shards and others an image folder in the `train` channel; "
                         "give the channel one kind of data")
    return sorted(set().union(*per_host))


def count_classes(root: str) -> int:
    found = folder_classes(root)
    return found if isinstance(found, int) else len(found)
