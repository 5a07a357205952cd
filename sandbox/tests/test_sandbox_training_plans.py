"""The sandbox's SageMaker training plans keep AWS's rules: an offering is sold once, a plan's name is the account's
once, the plan is Scheduled before its start and Active after it, and CreateTrainingJob refuses a plan that is not
the account's (ResourceNotFound), of another instance type, without room for the job's count, or expired
(ValidationException). Over HTTP with boto3, as trainctl meets it."""
from __future__ import annotations

import pytest
from botocore.exceptions import ClientError


def _error(call) -> tuple[str, str]:
    with pytest.raises(ClientError) as info:
        call()
    return info.value.response["Error"]["Code"], info.value.response["Error"]["Message"]


def _job(arn: str, itype: str = "ml.p4d.24xlarge", count: int = 1) -> dict:
    return dict(TrainingJobName="plan-job", RoleArn="arn:aws:iam::123456789012:role/some-role",
                AlgorithmSpecification={"TrainingImage": "123456789012.dkr.ecr.us-east-1.amazonaws.com/x:1",
                                        "TrainingInputMode": "File"},
                OutputDataConfig={"S3OutputPath": "s3://some-bucket/output"},
                ResourceConfig={"InstanceType": itype, "InstanceCount": count, "VolumeSizeInGB": 30,
                                "TrainingPlanArn": arn},
                StoppingCondition={"MaxRuntimeInSeconds": 600})


def test_a_training_plan_is_sold_once_and_a_job_must_fit_it(sandbox):
    sandbox.admin.action("set_capacity_blocks", start_in_hours=[5])
    sm = sandbox.client("sagemaker", "us-east-1")
    (offer,) = sm.search_training_plan_offerings(InstanceType="ml.p4d.24xlarge", InstanceCount=2, DurationHours=24,
                                                 TargetResources=["training-job"])["TrainingPlanOfferings"]
    arn = sm.create_training_plan(TrainingPlanName="plan-a", TrainingPlanOfferingId=offer["TrainingPlanOfferingId"],
                                  Tags=[{"Key": "trainctl:job", "Value": "j"}])["TrainingPlanArn"]
    assert _error(lambda: sm.create_training_plan(TrainingPlanName="plan-b", TrainingPlanOfferingId=offer[
        "TrainingPlanOfferingId"]))[0] == "ResourceNotFound"   # sold once
    plan = sm.describe_training_plan(TrainingPlanName="plan-a")
    assert plan["Status"] == "Scheduled" and plan["TotalInstanceCount"] == 2 and plan["UpfrontFee"]
    assert sm.list_tags(ResourceArn=arn)["Tags"] == [{"Key": "trainctl:job", "Value": "j"}]
    listed = sm.list_training_plans()["TrainingPlanSummaries"]
    assert [p["TrainingPlanArn"] for p in listed] == [arn]
    (again,) = sm.search_training_plan_offerings(InstanceType="ml.p4d.24xlarge", InstanceCount=2, DurationHours=24,
                                                 TargetResources=["training-job"])["TrainingPlanOfferings"]
    assert _error(lambda: sm.create_training_plan(TrainingPlanName="plan-a", TrainingPlanOfferingId=again[
        "TrainingPlanOfferingId"]))[0] == "ResourceInUse"   # the name is the account's already

    assert _error(lambda: sm.create_training_job(**_job(arn.replace("plan-a", "plan-z"))))[0] == "ResourceNotFound"
    code, msg = _error(lambda: sm.create_training_job(**_job(arn, itype="ml.p5.48xlarge")))
    assert code == "ValidationException" and "does not match" in msg
    code, msg = _error(lambda: sm.create_training_job(**_job(arn, count=3)))
    assert code == "ValidationException" and "2 instances available" in msg
    sandbox.admin.action("start_training_plan", plan="plan-a")
    assert sm.describe_training_plan(TrainingPlanName="plan-a")["Status"] == "Active"
    sandbox.admin.action("end_training_plan", plan="plan-a")
    code, msg = _error(lambda: sm.create_training_job(**_job(arn)))
    assert code == "ValidationException" and "Expired" in msg
