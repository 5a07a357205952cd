"""The spec's `data:` section: short and long forms, FSx channels, and one-line refusals."""
import pytest

from trainctl.errors import UsageError
from trainctl.spec import load_spec
from trainctl.spec.data import channel_env, channel_path

BASE = """name: d
entrypoint: {bundled: ddp}
model: {architecture: vit_micro}
workload: {samples: 1000, batch_size_per_accelerator: 8}
"""


def _load(tmp_path, data: str):
    path = tmp_path / "job.yaml"
    path.write_text(BASE + data)
    return load_spec(path)


def test_short_long_and_fsx_forms_load(tmp_path):
    spec = _load(tmp_path, "data:\n  train: s3://my-bucket/imgs/\n  val: {uri: 's3://my-bucket/val', mode: stream}\n"
                           "  ref: {fsx: fs-0123456789abcdef0, path: /abcdmount/dir}\n")
    assert spec.data["train"].bucket == "my-bucket" and spec.data["train"].prefix == "imgs/"
    assert spec.data["train"].mode == "copy" and spec.data["val"].mode == "stream"
    assert spec.data["ref"].mode == "mount" and spec.data["ref"].fsx == "fs-0123456789abcdef0"
    assert channel_path("train") == "/opt/ml/input/data/train" and channel_env("train") == "SM_CHANNEL_TRAIN"


def test_a_script_of_the_user_s_names_its_own_channels(tmp_path):
    """SageMaker's SDK examples read SM_CHANNEL_TRAINING: only the bundled entrypoints need `train`."""
    path = tmp_path / "job.yaml"
    path.write_text(BASE.replace("{bundled: ddp}", "{script: train.py, source_dir: .}")
                    .replace("{architecture: vit_micro}", "{params: 2, flops_per_sample: 12}")
                    + "data: {training: s3://my-bucket/t/}\n")
    (tmp_path / "train.py").write_text("")
    assert list(load_spec(path).data) == ["training"]


def test_no_data_section_is_none(tmp_path):
    assert _load(tmp_path, "").data is None


@pytest.mark.parametrize("data, said", [
    ("data: {val: s3://my-bucket/v/}", "no channel `train`"),
    ("data: {}", "data: is empty"),
    ("data: {train: s3://My_Bucket/x/}", "is not an S3 prefix"),
    ("data: {train: /local/dir}", "is not an S3 prefix"),
    ("data: {train: {uri: s3://my-bucket/x/, mode: fast}}", "mode"),
    ("data: {train: {fsx: fs-12, path: /m/x}}", "fsx"),
    ("data: {train: s3://my-bucket/x/, Train: s3://my-bucket/y/}", "differ only in case"),
    ("data: {train: s3://my-bucket/x/, my-val: s3://my-bucket/y/}", "data"),
])
def test_bad_sections_are_refused_in_one_line(tmp_path, data, said):
    with pytest.raises(UsageError) as err:
        _load(tmp_path, data + "\n")
    assert said in str(err.value) and "\n" not in str(err.value)
