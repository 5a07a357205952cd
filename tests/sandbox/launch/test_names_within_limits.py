"""Every name trainctl builds fits AWS's limits for the longest spec name it accepts, failover suffix included
the strict sandbox refuses an IAM role name over 64 characters as IAM does, so a real EC2 launch of
such a spec (roles, instance profile, launch template, placement and security groups, log group) must pass."""
from __future__ import annotations

import json

from tests.support.helpers import run_cli

from trainctl.naming import resources as naming
from trainctl.usecases.launch.launch_job import new_job_id

LONGEST = "n" + "-x" * 19 + "z"   # 40 characters: the spec's maximum


def test_names_of_the_longest_job_id_fit_their_limits():
    job = new_job_id(LONGEST) + "-f9"   # a failover attempt's id
    assert len(naming.job_resource_name(job)) <= 64
    assert len(naming.training_job_name(job)) <= 63
    assert len(naming.ec2_log_group(job)) <= 512
    # distinct ids keep distinct names after shortening
    assert naming.job_resource_name(job) != naming.job_resource_name(job[:-1] + "8")


def test_an_ec2_launch_of_the_longest_spec_name_passes_aws_s_name_rules(sandbox_env, tmp_path):
    assert len(LONGEST) == 40
    spec = tmp_path / "job.yaml"
    spec.write_text(f"""\
name: {LONGEST}
entrypoint: {{bundled: ddp, args: {{model: vit_micro, device: cpu}}}}
model: {{architecture: vit_micro, precision: fp32}}
workload: {{samples: 64, batch_size_per_accelerator: 8}}
candidates: {{layouts: ['g5.xlarge:1:on-demand'], platforms: [ec2], regions: [us-east-1]}}
""")
    home = tmp_path / "home"
    proc = run_cli(["-o", "json", "launch", str(spec), "--yes"], home, env=sandbox_env.env)
    assert proc.returncode == 0, proc.stderr
    job = json.loads(proc.stdout)["job_id"]
    roles = sandbox_env.client("iam").list_roles(PathPrefix="/trainctl/")["Roles"]
    assert roles and all(len(r["RoleName"]) <= 64 for r in roles)
    down = run_cli(["down", job], home, env=sandbox_env.env)
    assert down.returncode == 0, down.stderr
