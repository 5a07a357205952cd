"""The `trainctl:job` cost allocation tag made active in the sandbox as on AWS: the key is listed once a resource
carries it, then the account activates it once (`aws ce update-cost-allocation-tags-status`)."""
from __future__ import annotations

JOB_TAG = "trainctl:job"


def activate_job_tag(sb, region: str = "us-east-1") -> None:
    ec2 = sb.client("ec2", region)
    image = ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
    ec2.run_instances(ImageId=image, MinCount=1, MaxCount=1, InstanceType="t3.micro", TagSpecifications=[
        {"ResourceType": "instance", "Tags": [{"Key": JOB_TAG, "Value": "first-tagged-resource"}]}])
    out = sb.client("ce", "us-east-1").update_cost_allocation_tags_status(
        CostAllocationTagsStatus=[{"TagKey": JOB_TAG, "Status": "Active"}])
    assert out["Errors"] == [], out
