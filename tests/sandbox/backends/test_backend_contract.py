"""The backend contract, against the sandbox over HTTP: submit makes exactly the calls that prepare returned
(what --dry-run shows), counted with botocore event hooks on trainctl's own clients; a flag of the other
platform is refused in one line; both platforms ship the same code archive for the same spec; the EC2 log
tailer keeps the look-back that catches lines CloudWatch ingests late. The checks of the whole contract (listing,
outputs, doctor's checks, capability types) run against every registered backend, and the template
(backends/template/) has every method, each saying what to write."""
from __future__ import annotations

import copy
import hashlib
import json
import sys
import time
from pathlib import Path

import pytest

from tests.support.helpers import run_cli
from tests.support.ec2_jobs import SPEC, option, settings
from trainctl.aws import clients as aws
from trainctl.backends import BACKENDS, backend_class, get_backend, platforms
from trainctl.backends.base import Backend, LaunchSettings
from trainctl.backends.features import RecoversLostNodes
from trainctl.backends.options import OPTIONS
from trainctl.backends.preflight import Preflight
from trainctl.backends.template import TemplateBackend
from trainctl.backends.template.missing import Unwritten
from trainctl.catalog.platforms import BACKENDS_DIR, NAMES as PLATFORM_NAMES, read_platforms
from trainctl.iam import PLATFORMS, calls_for
from trainctl.iam.rows import CALLS_FILE, calls_in, platform_calls
from trainctl.spec import Platform as SPEC_PLATFORMS
from trainctl.backends.ec2 import Ec2Backend, log_group
from trainctl.backends.options import SageMakerOptions
from trainctl.backends.sagemaker import SageMakerBackend

SERVICES = ("ec2", "s3", "iam", "sts", "ssm", "sagemaker", "logs")
COMPENSATION = ("CreateTags", "TerminateInstances", "DeleteFleets")   # EC2's declared "otherwise"


def record_writes() -> list[tuple[str, str, dict]]:
    """Every write call trainctl's clients make from now on: (service, operation, params as passed)."""
    made: list[tuple[str, str, dict]] = []

    def hook(params, model, **_):
        if not model.name.startswith(("Describe", "Get", "List", "Head")):
            # a copy: later handlers replace the body with a stream in the dict botocore goes on with
            made.append((model.service_model.service_name, model.name, copy.deepcopy(params)))

    for service in SERVICES:
        aws.client(service, "us-east-1").meta.events.register("provide-client-params", hook)
    return made


def test_ec2_submit_makes_the_shown_calls_and_only_the_declared_compensation(env):
    sb, spec, path = env
    sb.admin.set_capacity("p4d.24xlarge", "us-east-1a", 1)   # the plan's AZ cannot hold 2: the next AZ's fleet
    backend = Ec2Backend()
    request = backend.prepare(option(), spec, settings(path))
    fleets = [c for c in request.calls if c.alternative_of == "fleet"]
    assert len(fleets) == 3 and request.to_json()["alternatives"][0]["group"] == "fleet"
    made = record_writes()
    out = backend.submit(request)
    assert out["availability_zone"] == fleets[1].about["availability_zone"]
    expected = [(c.service, c.operation) for c in request.calls if c is not fleets[2]]
    ops = [(s, o) for s, o, _ in made]
    first, second = ops.index(("ec2", "CreateFleet")), len(ops) - 1
    assert [op for op in ops[first + 1:second] if op[1] not in COMPENSATION] == []  # only the compensation
    assert [op for i, op in enumerate(ops) if not first < i < second] == expected
    # The fleets made are the fleets shown, parameter for parameter (client tokens included).
    assert [p for _, o, p in made if o == "CreateFleet"] == [fleets[0].params, fleets[1].params]
    code = next(c for c in request.calls if c.operation == "PutObject")
    sent = next(p for _, o, p in made if o == "PutObject")
    assert hashlib.sha256(sent["Body"]).digest() == hashlib.sha256(code.params["Body"]).digest()
    after_submit(backend, "job-1", code.params["Bucket"])
    backend.cleanup("job-1", "us-east-1")


def test_sagemaker_submit_makes_exactly_the_shown_calls(env):
    sb, spec, path = env
    backend = SageMakerBackend()
    request = backend.prepare(option("g5.xlarge", 1, "on-demand", None, platform="sagemaker"), spec,
                              LaunchSettings(job_id="job-sm", spec_path=path, options=SageMakerOptions()))
    made = record_writes()
    backend.submit(request)
    try:
        assert [(s, o) for s, o, _ in made] == [(c.service, c.operation) for c in request.calls]
        job = next(c for c in request.calls if c.operation == "CreateTrainingJob").params
        sent = next(p for _, o, p in made if o == "CreateTrainingJob")
        assert sent["HyperParameters"] == job["HyperParameters"] and sent["RoleArn"] == job["RoleArn"]
        after_submit(backend, "job-sm", next(c for c in request.calls if c.operation == "PutObject").params["Bucket"])
    finally:
        backend.stop("job-sm", "us-east-1")


def after_submit(backend: Backend, job_id: str, bucket: str) -> None:
    """What every backend says of a job it launched: `ls --all` finds it from AWS alone, and where the platform
    records its outputs lies in the job bucket's layout."""
    assert job_id in [j.job_id for j in backend.running_jobs("us-east-1")]
    model = backend.output_places(job_id, "us-east-1").get("model")
    assert model is None or model.startswith(type(backend).model_output(bucket, job_id))


def test_the_backends_and_the_pure_layers_know_the_same_platforms_in_the_same_order():
    # the spec's names, the schema's enum, the planner's overheads and the IAM table read catalog/platforms.py, which
    # reads each backend folder's platform.toml; launching reads the registry: a platform in one alone would plan
    # what cannot launch, or the reverse
    assert platforms() == PLATFORM_NAMES == SPEC_PLATFORMS.__args__ == PLATFORMS
    folders = {platform: Path(sys.modules[backend_class(platform).__module__].__file__).parent
               for platform in platforms()}
    assert read_platforms(BACKENDS_DIR) == {p: read_platforms(folder.parent)[p] for p, folder in folders.items()}
    assert "template" not in read_platforms(TEMPLATE.parent)   # its data files end in .example


@pytest.mark.parametrize("platform", platforms())
def test_each_backend_s_rows_of_the_iam_table_are_in_its_folder(platform):
    folder = Path(sys.modules[backend_class(platform).__module__].__file__).parent
    own = calls_in(folder / CALLS_FILE, platform)
    assert own == platform_calls(platform) and all(call in calls_for(platform) for call in own)
    # the template's example reads as rows and as a platform entry once renamed (what a new backend copies)
    assert calls_in(TEMPLATE / f"{CALLS_FILE}.example", "template")


@pytest.mark.parametrize("platform", platforms())
def test_each_backend_declares_the_whole_contract(platform):
    cls = backend_class(platform)
    assert cls.platform == platform and cls.title and cls.options_type is OPTIONS[platform]
    assert cls.facts().name == platform and cls.facts().title == cls.title   # its folder's platform.toml
    service, _, kind = cls.tagged_resource_type.partition(":")
    assert service and kind, cls.tagged_resource_type
    assert cls.model_output("bkt", "job-x").startswith("s3://bkt/job-x/")
    assert cls.capabilities.recover == issubclass(cls, RecoversLostNodes)
    # the folder has a module and a data file for each of the template's (what docs/adding-a-backend.md lists)
    template = {p.name for p in TEMPLATE.glob("*.py")} - {"missing.py"} | {p.stem for p in TEMPLATE.glob("*.example")}
    assert template <= {p.name for p in Path(sys.modules[cls.__module__].__file__).parent.iterdir()}


@pytest.mark.parametrize("platform", platforms())
def test_a_platform_the_spec_does_not_use_is_skipped_by_doctor_without_asking_aws(platform):
    def no_aws(service, region):
        raise AssertionError(f"{platform} asked {service} for a platform the spec does not use")

    backend = get_backend(platform, no_aws)
    ctx = Preflight("us-east-1", platforms=tuple(p for p in platforms() if p != platform))
    checks = backend.preflight_checks(ctx) + backend.late_preflight_checks(ctx)
    assert all(c.status == "skip" and c.detail for c in checks), checks
    assert [c.name for c in checks] == list(backend.preflight_names)   # what doctor skips without credentials


TEMPLATE = Path(sys.modules[TemplateBackend.__module__].__file__).parent


def test_the_template_has_every_method_and_each_says_what_to_write():
    assert "template" not in BACKENDS
    backend = TemplateBackend(lambda service, region: None)   # nothing abstract is left: it instantiates
    own = set(vars(TemplateBackend))
    assert Backend.__abstractmethods__ <= own, Backend.__abstractmethods__ - own
    calls = {"prepare": lambda: backend.prepare(None, None, None), "describe": lambda: backend.describe("j", "r"),
             "logs": lambda: backend.logs("j", "r", None), "stop": lambda: backend.stop("j", "r"),
             "cleanup": lambda: backend.cleanup("j", "r"), "running_jobs": lambda: backend.running_jobs("r"),
             "model_output": lambda: backend.model_output("b", "j"),
             "preflight_checks": lambda: backend.preflight_checks(Preflight("r", ()))}
    assert set(calls) >= Backend.__abstractmethods__
    guide = (Path(__file__).resolve().parents[3] / "docs" / "adding-a-backend.md").read_text()
    files = [p.name for p in TEMPLATE.glob("*.py")] + [p.stem for p in TEMPLATE.glob("*.example")]
    unnamed = [name for name in files if f"`{name}`" not in guide]
    assert not unnamed, f"docs/adding-a-backend.md does not list {unnamed}"
    for name, call in calls.items():
        with pytest.raises(Unwritten, match=f"backend template: implement [a-z_]+\\.{name}: "):
            call()


def test_submit_is_the_base_class_s_alone():
    with pytest.raises(TypeError, match="must not override submit"):
        type("Sneaky", (Ec2Backend,), {"submit": lambda self, request, progress=None: {}})
    with pytest.raises(TypeError, match="abstract"):
        type("Partial", (Backend,), {"platform": "x"})()   # describe, logs, stop, cleanup, prepare missing


@pytest.mark.parametrize("platform,flag,value", [("sagemaker", "--ami", "ami-0123456789abcdef0"),
                                                 ("sagemaker", "--ssh-cidr", "203.0.113.7/32"),
                                                 ("ec2", "--role", "my-role"),
                                                 ("ec2", "--image", "example.com/x:1")])
def test_a_flag_of_the_other_platform_is_refused_in_one_line(tmp_path, platform, flag, value):
    spec = tmp_path / "job.yaml"
    spec.write_text(SPEC + "candidates: {layouts: ['g5.xlarge:1:on-demand'], platforms: [sagemaker, ec2]}\n")
    proc = run_cli(["launch", str(spec), "--offline", "--platform", platform, "--dry-run", flag, value], tmp_path)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert flag in lines[0] and f"is on {platform}" in lines[0] and "Traceback" not in proc.stderr


def test_launch_help_names_each_flag_s_platforms(tmp_path):
    out = " ".join(run_cli(["launch", "--help"], tmp_path).stdout.split())
    assert "--ami <str> ec2: AMI id" in out and "--ssh-cidr <str> ec2: Allow SSH" in out
    assert "--role <str> sagemaker: SageMaker execution role" in out and "--image <str> sagemaker: Training" in out
    assert "--bucket <str> sagemaker/ec2: Job bucket" in out and "--subnet <str> sagemaker/ec2: Subnet" in out
    assert "--max-runtime-hours <float range> sagemaker/ec2: Stop the training job" in out


CODE_SPEC = """\
name: own-code
entrypoint: {script: train.py, source_dir: code}
model: {architecture: vit_micro}
workload: {samples: 64, batch_size_per_accelerator: 8}
candidates: {layouts: ['g5.xlarge:1:on-demand'], platforms: [sagemaker, ec2], regions: [us-east-1]}
"""


def test_both_platforms_ship_the_same_archive_from_the_spec_s_folder(sandbox, tmp_path):
    folder = tmp_path / "project"
    (folder / "code" / "data").mkdir(parents=True)
    (folder / "code" / "train.py").write_text("print('training')\n")
    (folder / "code" / "data" / "big.bin").write_bytes(b"\0" * 1000)
    (folder / "code" / ".gitignore").write_text("data/\n*.log\n!keep.log\n")
    (folder / "code" / "debug.log").write_text("noise\n")
    (folder / "code" / "keep.log").write_text("kept by the negation\n")
    (folder / "job.yaml").write_text(CODE_SPEC)
    bodies = {}
    for platform in ("sagemaker", "ec2"):   # run_cli runs from the repository root, not the spec's folder
        proc = run_cli(["-o", "json", "launch", str(folder / "job.yaml"), "--platform", platform, "--dry-run"],
                       tmp_path / "home", env=sandbox.env)
        assert proc.returncode == 0, proc.stderr
        doc = json.loads(proc.stdout)
        bodies[platform] = next(r for r in doc["requests"] if r["operation"] == "PutObject")["params"]["Body"]
        if platform == "sagemaker":
            assert any(n.startswith("code 3 files (.gitignore, keep.log, train.py)") for n in doc["notes"]), \
                doc["notes"]
    assert bodies["sagemaker"]["sha256"] == bodies["ec2"]["sha256"]


def test_ec2_logs_keep_a_look_back_for_lines_ingested_late(env):
    sb, _, _ = env
    cw, group = sb.client("logs"), log_group("job-logs")
    cw.create_log_group(logGroupName=group)
    for host in ("i-host-a", "i-host-b"):
        cw.create_log_stream(logGroupName=group, logStreamName=host)
    now = int(time.time() * 1000)
    cw.put_log_events(logGroupName=group, logStreamName="i-host-a",
                      logEvents=[{"timestamp": now, "message": "a: step 2"}])
    backend = Ec2Backend()
    lines, cursor = backend.logs("job-logs", "us-east-1", None)
    assert [ln.message for ln in lines] == ["a: step 2"]
    # host b's line was written 2 s before a's newest, and reaches CloudWatch only now
    cw.put_log_events(logGroupName=group, logStreamName="i-host-b",
                      logEvents=[{"timestamp": now - 2000, "message": "b: step 1"}])
    lines, cursor = backend.logs("job-logs", "us-east-1", cursor)
    assert [(ln.host, ln.message) for ln in lines] == [("i-host-b", "b: step 1")]
    assert backend.logs("job-logs", "us-east-1", cursor)[0] == []   # nothing twice
