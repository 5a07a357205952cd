"""The survivors' replacement of a reclaimed node: what on_spot_shortage decides at each wait, the back-off, the
S3 ledger of claims and outcomes, and the node role's bounds (evaluated as IAM evaluates them: only this job's
launch template, only resources tagged with this job)."""
from __future__ import annotations

from datetime import datetime, timezone

from tests.support.policy_eval import Request, allowed
from trainctl.bootstrap.replacement import BACKOFF_MAX_S, Ledger, backoff_s, decide
from trainctl.iam.boundary import boundary_policy
from trainctl.iam.node_role import node_policy

ACCOUNT, REGION, JOB = "123456789012", "us-east-1", "job-1"


def test_wait_keeps_trying_spot_until_the_longest_wait_then_fails():
    assert decide("wait", "spot", 3599, 600, 3600, None) == ("spot", "")
    assert decide("wait", "spot", 3000, 600, 3600, -50)[0] == "spot"  # a deadline does not change `wait`
    market, why = decide("wait", "spot", 3600, 600, 3600, None)
    assert market == "fail" and "max_spot_wait_hours" in why


def test_on_demand_falls_back_after_the_spot_try_or_at_once_when_the_deadline_cannot_wait():
    assert decide("on-demand", "spot", 599, 600, 3600, None) == ("spot", "")
    assert decide("on-demand", "spot", 600, 600, 3600, None)[0] == "on-demand"
    market, why = decide("on-demand", "spot", 0, 600, 3600, 0.0)
    assert market == "on-demand" and "deadline" in why


def test_fail_ends_the_job_where_on_demand_would_fall_back():
    market, why = decide("fail", "spot", 600, 600, 3600, None)
    assert market == "fail" and "on_spot_shortage: fail" in why
    assert decide("fail", "spot", 10, 600, 3600, None)[0] == "spot"


def test_an_on_demand_job_is_replaced_as_it_is():
    assert decide("fail", "on-demand", 10_000, 600, 3600, 0.0) == ("on-demand", "")


def test_backoff_doubles_up_to_its_cap():
    assert [backoff_s(15, n) for n in (1, 2, 3)] == [15, 30, 60] and backoff_s(15, 20) == BACKOFF_MAX_S


def _obj(name: str, at: float) -> dict:
    return {"Key": f"{JOB}/status/{name}", "LastModified": datetime.fromtimestamp(at, timezone.utc)}


def test_the_ledger_counts_replacements_tries_and_the_next_try():
    now = 10_000.0
    ledger = Ledger([_obj("replace-1-1", 100), _obj("replaced-1", 200), _obj("replace-2-1", now - 50),
                     _obj("refused-2-1-10030", now - 40), _obj("interrupted-i-1", 90)], now)
    assert (ledger.done, ledger.k, ledger.tries, ledger.refusals) == (1, 2, 1, 1)
    assert ledger.first_at == now - 50 and ledger.not_before == 10_030 and not ledger.open_claim
    held = Ledger([_obj("replace-1-1", now - 5)], now)
    assert held.open_claim  # a try in flight: nobody else tries
    assert not Ledger([_obj("replace-1-1", now - 1000)], now).open_claim  # its agent died: the next may try
    assert Ledger([_obj("stopped", now)], now).ended() == "stopped"


def _may(action: str, resource: str, **context) -> bool:
    policy = node_policy(JOB, "b", REGION, ACCOUNT, "code")
    return allowed(Request(action, resource, context), [policy], boundary_policy())


def test_the_node_role_launches_only_from_its_own_jobs_template_and_only_tagged_instances():
    own = {"aws:ResourceTag/trainctl:job": JOB}
    template = f"arn:aws:ec2:{REGION}:{ACCOUNT}:launch-template/lt-1"
    assert _may("ec2:CreateFleet", template, **own) and _may("ec2:RunInstances", template, **own)
    assert not _may("ec2:RunInstances", template, **{"aws:ResourceTag/trainctl:job": "job-2"})
    assert not _may("ec2:RunInstances", template)  # an untagged template: anyone's
    instance = f"arn:aws:ec2:{REGION}:{ACCOUNT}:instance/*"
    assert _may("ec2:RunInstances", instance, **{"aws:RequestTag/trainctl:job": JOB})
    assert not _may("ec2:RunInstances", instance, **{"aws:RequestTag/trainctl:job": "job-2"})
    subnet = f"arn:aws:ec2:{REGION}:{ACCOUNT}:subnet/subnet-1"
    assert _may("ec2:RunInstances", subnet, **{"ec2:LaunchTemplate": template})
    assert not _may("ec2:RunInstances", subnet)  # a launch without a template
    tag_on_create = {"aws:RequestTag/trainctl:job": JOB, "ec2:CreateAction": "CreateFleet"}
    assert _may("ec2:CreateTags", instance, **tag_on_create)
    assert not _may("ec2:CreateTags", instance, **{"aws:RequestTag/trainctl:job": JOB})  # not on create
    role = f"arn:aws:iam::{ACCOUNT}:role/trainctl/trainctl-{JOB}"
    assert _may("iam:PassRole", role, **{"iam:PassedToService": "ec2.amazonaws.com"})
    assert not _may("iam:PassRole", f"arn:aws:iam::{ACCOUNT}:role/trainctl/trainctl-job-2",
                    **{"iam:PassedToService": "ec2.amazonaws.com"})
    assert _may("ec2:TerminateInstances", f"arn:aws:ec2:{REGION}:{ACCOUNT}:instance/i-1", **own)
    assert not _may("ec2:TerminateInstances", f"arn:aws:ec2:{REGION}:{ACCOUNT}:instance/i-1")
