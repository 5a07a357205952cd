"""`trainctl fetch` of a hostile job's output (issue 36, items 1 and 2), through the CLI against the sandbox.

A job's role may write under its own `JOB/output/` (naming/bucket.py: JOB_WRITABLE), so both the keys there and the
files of SageMaker's model.tar.gz are what the job's script chose. Each test writes them as such a job may, then
fetches: nothing may land outside DEST, whatever the member type or key shape, and sizes are capped up front."""
from __future__ import annotations

import gzip
import io
import json
import os
import tarfile
import time

from tests.support.helpers import run_cli

ME = "123456789012"
BUCKET = f"trainctl-{ME}-us-east-1"
ROLE = f"arn:aws:iam::{ME}:role/trainctl-sagemaker-execution"  # seeded in the sandbox
IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.5.1-cpu-py311"


def _sagemaker_job(sb, name: str) -> str:
    """A SageMaker job in the job bucket's layout, ended (its code is missing: it fails at once), so nothing of
    the sandbox's writes after the test's; returns the key its S3ModelArtifacts names."""
    sm = sb.client("sagemaker")
    sm.create_training_job(
        TrainingJobName=name, RoleArn=ROLE,
        HyperParameters={"sagemaker_program": '"train.py"',
                         "sagemaker_submit_directory": f'"s3://{BUCKET}/trainctl/code/none/sourcedir.tar.gz"'},
        AlgorithmSpecification={"TrainingImage": IMAGE, "TrainingInputMode": "File"},
        OutputDataConfig={"S3OutputPath": f"s3://{BUCKET}/{name}/output"},
        ResourceConfig={"InstanceType": "ml.g5.xlarge", "InstanceCount": 1, "VolumeSizeInGB": 30},
        StoppingCondition={"MaxRuntimeInSeconds": 600})
    while sm.describe_training_job(TrainingJobName=name)["TrainingJobStatus"] not in ("Completed", "Failed",
                                                                                       "Stopped"):
        time.sleep(0.2)
    uri = sm.describe_training_job(TrainingJobName=name)["ModelArtifacts"]["S3ModelArtifacts"]
    return uri.removeprefix(f"s3://{BUCKET}/")


def _member(name: str, kind: bytes = tarfile.REGTYPE, data: bytes = b"", link: str = "",
            size: int | None = None) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, link
    info.size = len(data) if size is None else size
    if kind in (tarfile.CHRTYPE, tarfile.BLKTYPE):
        info.devmajor, info.devminor = 1, 3
    return info, data


def _archive(members, data_too: bool = True) -> bytes:
    """A .tar.gz with these headers as given (addfile writes any header a job's own tar could); without data_too,
    the headers alone, as a truncated archive that declares sizes it does not hold."""
    raw = io.BytesIO()
    if data_too:
        with tarfile.open(fileobj=raw, mode="w", format=tarfile.GNU_FORMAT) as tar:
            for info, data in members:
                tar.addfile(info, io.BytesIO(data) if info.isreg() else None)
    else:
        for info, _ in members:
            raw.write(info.tobuf(tarfile.GNU_FORMAT))
    return gzip.compress(raw.getvalue(), mtime=0)


def _fetch(sb, tmp_path, job: str, platform: str, dest, *extra: str):
    return run_cli(["fetch", job, str(dest), "--what", "model", "--platform", platform, *extra], tmp_path / "home",
                   env=sb.env)


def _tree(root) -> dict[str, str]:
    return {str(p.relative_to(root)): ("link" if p.is_symlink() else "dir" if p.is_dir() else p.read_text())
            for p in sorted(root.rglob("*"))}


def test_a_hostile_model_archive_writes_only_its_files_inside_dest(sandbox_env, tmp_path):
    job = "hostile-archive"
    key = _sagemaker_job(sandbox_env, job)
    marker = f"/tmp/trainctl-fetch-escape-{tmp_path.name}"
    archive = _archive([
        _member("x/", tarfile.SYMTYPE, link=".."),  # 3.11.7's data filter lets this one through
        _member("x/escaped.pth", data=b"import os  # ran on the next python\n"),
        _member("up", tarfile.SYMTYPE, link="../.."),
        _member("up/deeper.txt", data=b"through a link\n"),
        _member("abs", tarfile.SYMTYPE, link="/tmp"),
        _member("abs/escape.txt", data=b"through an absolute link\n"),
        _member("hard", tarfile.LNKTYPE, link="../outside.txt"),
        _member("dev", tarfile.CHRTYPE), _member("fifo", tarfile.FIFOTYPE), _member("blk", tarfile.BLKTYPE),
        _member(marker, data=b"absolute\n"),
        _member("../dotdot.txt", data=b"parent\n"),
        _member("d/sub/../../../dotdot2.txt", data=b"parent\n"),
        _member("./", tarfile.DIRTYPE), _member("d/", tarfile.DIRTYPE),
        _member("d/ok.bin", data=b"model weights\n"),
        _member("./good.txt", data=b"good\n"),
        _member("a", data=b"file a\n"), _member("a/b", data=b"under a\n"),
        _member("good.txt", data=b"a second good.txt\n"),
    ])
    s3 = sandbox_env.client("s3")
    s3.put_object(Bucket=BUCKET, Key=key, Body=archive)  # as the job's role may (JOB/output/)
    s3.put_object(Bucket=BUCKET, Key=key.rsplit("/", 1)[0] + "/x/escaped-key.pth", Body=b"key through x\n")
    (tmp_path / "work").mkdir()
    dest = tmp_path / "work" / "dest"
    out = _fetch(sandbox_env, tmp_path, job, "sagemaker", dest)
    assert out.returncode == 0, out.stderr
    assert _tree(tmp_path / "work") == {"dest": "dir", "dest/a": "file a\n", "dest/d": "dir",
                                        "dest/d/ok.bin": "model weights\n", "dest/good.txt": "good\n",
                                        "dest/x": "dir", "dest/x/escaped.pth": "import os  # ran on the next python\n",
                                        "dest/up": "dir", "dest/up/deeper.txt": "through a link\n",
                                        "dest/abs": "dir", "dest/abs/escape.txt": "through an absolute link\n"}
    assert not os.path.exists(marker) and not (tmp_path / "outside.txt").exists()
    assert not (tmp_path / "dotdot.txt").exists() and not (tmp_path / "work" / "dotdot.txt").exists()
    for refused in ("x/: a symbolic link", "hard: a hard link", "dev: a device", "fifo: a FIFO",
                    "blk: a device", f"{marker}: an absolute path", "../dotdot.txt: a path with '..'",
                    "a/b: its folder is also a file", "good.txt: a duplicate name"):
        assert refused in out.stderr, (refused, out.stderr)
    written = sum(len(v) for k, v in _tree(dest).items() if v != "dir")
    assert f"model: 6 files, {written} bytes written" in out.stdout, out.stdout


def test_keys_of_every_shape_are_downloaded_inside_dest_or_named(sandbox_env, tmp_path):
    """An EC2 job's model is files under JOB/output/model/: a key `.`, keys `a` beside `a/b`, `../x` and `//x` are
    named and the others still come."""
    job = "hostile-keys"
    s3 = sandbox_env.client("s3")
    prefix = f"{job}/output/model/"
    for rest, body in ((".", b"dot"), ("a", b"file a"), ("a/b", b"under a"), ("../x", b"up"), ("../../y", b"up2"),
                       ("//abs", b"absolute"), ("sub/./ok.txt", b"ok"), ("weights.bin", b"w" * 1000)):
        s3.put_object(Bucket=BUCKET, Key=prefix + rest, Body=body)
    dest = tmp_path / "dest"
    out = run_cli(["-o", "json", "fetch", job, str(dest), "--what", "model", "--platform", "ec2"],
                  tmp_path / "home", env=sandbox_env.env)
    assert out.returncode == 0, out.stderr
    assert _tree(dest) == {"a": "file a", "sub": "dir", "sub/ok.txt": "ok", "weights.bin": "w" * 1000}
    got = json.loads(out.stdout)
    assert (got["files"], got["bytes"]) == (3, 1008)
    assert sorted(s.split(": ")[0] for s in got["skipped"]) == sorted(
        prefix + r for r in (".", "a/b", "../x", "../../y", "//abs"))
    assert {p.name for p in tmp_path.iterdir()} - {"home"} == {"dest"}
    # a destination that already holds something is refused, not written into
    again = run_cli(["fetch", job, str(dest), "--what", "model", "--platform", "ec2"], tmp_path / "home",
                    env=sandbox_env.env)
    assert again.returncode != 0 and "not an empty folder" in again.stderr
    assert len(again.stderr.strip().splitlines()) == 1


def test_an_archive_that_would_write_more_than_the_cap_or_the_free_space_writes_nothing(sandbox_env, tmp_path):
    job = "hostile-bomb"
    key = _sagemaker_job(sandbox_env, job)
    s3 = sandbox_env.client("s3")
    bomb = _archive([_member("zeros.bin", data=b"\0" * (4 << 20))])  # 4 MiB from about 4 KB
    assert len(bomb) < 100_000
    s3.put_object(Bucket=BUCKET, Key=key, Body=bomb)
    dest = tmp_path / "dest"
    out = _fetch(sandbox_env, tmp_path, job, "sagemaker", dest, "--max-gib", "0.001")
    assert out.returncode != 0
    assert "would write 4194304 bytes, over fetch's cap of 1073741 bytes; nothing written" in out.stderr
    assert not dest.exists()
    # a header that declares a petabyte the archive does not hold: refused at that header, before the next
    s3.put_object(Bucket=BUCKET, Key=key, Body=_archive([_member("huge.bin", size=1 << 50),
                                                         _member("after.bin", data=b"x")], data_too=False))
    out = _fetch(sandbox_env, tmp_path, job, "sagemaker", dest, "--max-gib", str(1 << 21))
    assert out.returncode != 0
    assert f"would write {1 << 50} bytes and " in out.stderr and "bytes free; nothing written" in out.stderr
    assert not dest.exists()
    assert {p.name for p in tmp_path.iterdir()} <= {"home"}  # nor the archive, kept only while read
    # within the cap, the bytes reported are the files written, not the archive's
    s3.put_object(Bucket=BUCKET, Key=key, Body=bomb)
    out = _fetch(sandbox_env, tmp_path, job, "sagemaker", dest)
    assert out.returncode == 0, out.stderr
    assert "model: 1 files, 4194304 bytes written" in out.stdout
