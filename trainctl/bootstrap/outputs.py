"""What an EC2 job leaves in S3 besides checkpoints, where SageMaker leaves it for its jobs:
- TensorBoard events, written by the job to /opt/ml/output/tensorboard (SageMaker's TensorBoardOutputConfig
  default), synced to s3://BUCKET/JOB/tensorboard/ while the job runs and once more when it ends, so the events
  survive a Spot replacement;
- the model, written to $SM_MODEL_DIR (/opt/ml/model), uploaded by rank 0 to s3://BUCKET/JOB/output/model/
  when the training completes.
"""
from __future__ import annotations

import os
import threading


class Outputs:
    def __init__(self, s3, bucket: str, job: str, ml: str, log, owner: dict):
        self.s3, self.bucket, self.job, self.ml, self.log, self.owner = s3, bucket, job, ml, log, owner
        self.tensorboard_dir = os.path.join(ml, "output", "tensorboard")
        self.model_dir = os.path.join(ml, "model")
        self._synced: dict[str, tuple[int, int]] = {}

    def upload_tree(self, folder: str, prefix: str, only_changed: bool) -> int:
        """Files under folder to prefix (relative names); with only_changed, those not uploaded as they are."""
        count = 0
        for top, _, files in os.walk(folder):
            for name in sorted(files):
                path = os.path.join(top, name)
                try:
                    st = os.stat(path)
                except FileNotFoundError:  # a writer renamed it away meanwhile
                    continue
                sig = (st.st_size, st.st_mtime_ns)
                if only_changed and self._synced.get(path) == sig:
                    continue
                key = prefix + os.path.relpath(path, folder).replace(os.sep, "/")
                self.s3.upload_file(path, self.bucket, key, ExtraArgs=self.owner)
                self._synced[path] = sig
                count += 1
        return count

    def sync_tensorboard(self) -> None:
        if os.path.isdir(self.tensorboard_dir):
            self.upload_tree(self.tensorboard_dir, f"{self.job}/tensorboard/", only_changed=True)

    def sync_loop(self, done: threading.Event, every_s: float) -> None:
        while not done.wait(every_s):
            try:
                self.sync_tensorboard()
            except Exception as e:  # noqa: BLE001 - the next round or the final sync retries
                self.log(f"trainctl-agent: TensorBoard sync failed: {e}")

    def upload_model(self) -> None:
        n = self.upload_tree(self.model_dir, f"{self.job}/output/model/", only_changed=False) \
            if os.path.isdir(self.model_dir) else 0
        self.log(f"trainctl-agent: model: {n} files from {self.model_dir} to "
                 f"s3://{self.bucket}/{self.job}/output/model/")
