"""The account's record of a job, as trainctl keeps it in the job bucket: the contract every machine reads.

- `JOB/job.json` (`JobDocument`): written by `trainctl launch` before the job starts, then updated (status,
  the platform's ids, the measured throughput) by whoever follows the job. Any machine with read access to the
  account's trainctl bucket can watch, list, stop or take down the job from it: the account is the shared
  state, the local database (state/job_store.py) is a cache of it.
- `trainctl/measurements/JOB.json` (`MeasurementDocument`): the throughput a completed job measured, one object
  per job under one prefix, so a plan finds the account's measurements with one listing.

Each document carries `format`. A reader refuses a format it does not know (`UnknownFormat`, one line naming
the job and the format) rather than guess at fields a newer trainctl wrote. Pure: pydantic only, no I/O.
"""
from __future__ import annotations

import hashlib
import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from trainctl.errors import TrainctlError
from trainctl.naming.bucket import MEASUREMENTS_PREFIX, RECORD_NAME  # noqa: F401 (re-exported)
from trainctl.plans import Option

FORMAT = 1                       # the record format this trainctl writes and reads


def record_key(job_id: str) -> str:
    return f"{job_id}/{RECORD_NAME}"


def measurement_key(job_id: str) -> str:
    return f"{MEASUREMENTS_PREFIX}{job_id}.json"


def spec_sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


class JobDocument(BaseModel):
    """`JOB/job.json`: what launched, where, by whom, and what came of it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    format: int = FORMAT
    job_id: str
    platform: str
    region: str
    account: str
    spec_path: str
    spec_name: str
    spec_text: str = Field(description="the spec file as it was launched")
    spec_sha256: str
    model: str
    batch_size: int
    option: Option = Field(description="the chosen option, with its prediction (hours, dollars, throughput)")
    failover_from: str | None = None
    launched_by: str = Field(description="the launcher's ARN (sts GetCallerIdentity); '' when AWS did not say")
    launched_at: float
    platform_ids: dict[str, str] = Field(default_factory=dict, description="training job ARN, fleet id, ...")
    status: str = "Submitting"
    status_by: str = ""          # the ARN that wrote the status
    updated_at: float
    samples_per_s: float | None = None   # measured, once the job completed


class MeasurementDocument(BaseModel):
    """`trainctl/measurements/JOB.json`: a completed job's throughput, read by the account's later plans."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    format: int = FORMAT
    job_id: str
    account: str
    model: str
    batch_size: int
    instance_type: str
    count: int
    samples_per_s: float = Field(gt=0, allow_inf_nan=False)
    measured_at: float
    measured_by: str = ""


class UnknownFormat(TrainctlError):
    """A record written by a trainctl this one does not understand."""


class DamagedRecord(TrainctlError):
    """A record that is not what trainctl writes (a hand edit, a foreign object at the key)."""


def parse(kind: type[BaseModel], body: bytes, where: str, job_id: str) -> Any:
    """The document at `where` (s3://bucket/key), or one line saying why it cannot be read."""
    try:
        doc = json.loads(body)
    except ValueError as e:
        raise DamagedRecord(f"{job_id}: {where} is not JSON ({e}); trainctl writes it at launch") from None
    version = doc.get("format") if isinstance(doc, dict) else None
    if version != FORMAT:
        raise UnknownFormat(f"{job_id}: {where} has record format {version!r}, which this trainctl does not "
                            f"understand (it reads format {FORMAT}): upgrade trainctl to act on this job")
    try:
        return kind.model_validate(doc)
    except ValidationError as e:
        first = e.errors()[0]
        field = ".".join(str(p) for p in first["loc"]) or "(document)"
        raise DamagedRecord(f"{job_id}: {where}: {field}: {first['msg']}; the record is not as trainctl wrote "
                            "it") from None


def dump(doc: BaseModel) -> bytes:
    return doc.model_dump_json().encode()
