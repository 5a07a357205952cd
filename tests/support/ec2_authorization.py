"""The authorization requests AWS makes for the CreateFleet of an EC2 launch, derived from the exact requests
`launch --dry-run -o json` prints, so that a test can evaluate trainctl's CLI policy against them
(tests/support/policy_eval.py). The sandbox does not evaluate IAM itself: this is its stand-in for the call
AWS would refuse with UnauthorizedOperation.

What a CreateFleet is authorized against: the Service Authorization Reference (EC2, CreateFleet: fleet and
instance required; launch template, image, subnet, volume, placement group when used) and the RunInstances
that an instant fleet makes with the caller's permissions (RunInstances: image, instance, network-interface,
security-group, subnet required; volume, launch template, placement group, Spot request when used). Request
tags are the call's TagSpecifications and its launch template's (EC2 User Guide, "Grant permission to tag
resources during creation"); tag-on-create also needs ec2:CreateTags with `ec2:CreateAction`.
"""
from __future__ import annotations

from tests.support.policy_eval import Request

ACCOUNT = "123456789012"
CREATED = ("instance", "volume", "network-interface")


def _tags(specs, resource_type: str) -> dict[str, str]:
    return {t["Key"]: t["Value"] for s in specs or [] if s["ResourceType"] == resource_type for t in s["Tags"]}


def _request_tags(tags: dict[str, str]) -> dict:
    return {**{f"aws:RequestTag/{k}": v for k, v in tags.items()}, "aws:TagKeys": sorted(tags)}


def _resource_tags(tags: dict[str, str]) -> dict:
    return {f"aws:ResourceTag/{k}": v for k, v in tags.items()}


def _first(requests: list[dict], operation: str) -> dict:
    return next(r["params"] for r in requests if r["operation"] == operation)


def fleet_authorizations(requests: list[dict], region: str) -> list[Request]:
    """Every (action, resource, context) the first CreateFleet of the dry run is authorized against. A security
    group trainctl creates (`${security_group_id}`) carries the job tag; a given one carries none."""
    template, fleet = _first(requests, "CreateLaunchTemplate"), _first(requests, "CreateFleet")
    group_tags = _tags(_first(requests, "CreateSecurityGroup")["TagSpecifications"], "security-group") \
        if any(r["operation"] == "CreateSecurityGroup" for r in requests) else {}
    placement = _first(requests, "CreatePlacementGroup")
    data = template["LaunchTemplateData"]
    arn = lambda kind, rid="*": f"arn:aws:ec2:{region}:{ACCOUNT}:{kind}/{rid}"  # noqa: E731
    groups = data.get("SecurityGroupIds") or [g for n in data.get("NetworkInterfaces", []) for g in n["Groups"]]
    overrides = fleet["LaunchTemplateConfigs"][0]["Overrides"]
    created = {kind: {**_tags(data["TagSpecifications"], kind), **_tags(fleet["TagSpecifications"], kind)}
               for kind in CREATED}
    used = [(arn("launch-template", "lt-0"), _resource_tags(_tags(template["TagSpecifications"], "launch-template"))),
            (f"arn:aws:ec2:{region}::image/{data['ImageId']}", {}),
            (arn("placement-group", placement["GroupName"]),
             _resource_tags(_tags(placement["TagSpecifications"], "placement-group"))),
            *[(arn("subnet", o["SubnetId"]), {}) for o in overrides],
            *[(arn("security-group", g), _resource_tags(group_tags) if g.startswith("${") else {}) for g in groups]]
    if fleet["TargetCapacitySpecification"]["DefaultTargetCapacityType"] == "spot":
        used.append((arn("spot-instances-request"), {}))
    base = {"aws:PrincipalAccount": ACCOUNT, "ec2:Region": region}
    fleet_tags = _tags(fleet["TagSpecifications"], "fleet")
    out = [Request("ec2:CreateFleet", arn("fleet"), {**base, **_request_tags(fleet_tags)}),
           Request("ec2:CreateTags", arn("fleet"), {**base, **_request_tags(fleet_tags),
                                                     "ec2:CreateAction": "CreateFleet"})]
    for action in ("ec2:CreateFleet", "ec2:RunInstances"):
        out += [Request(action, arn(kind), {**base, **_request_tags(tags)}) for kind, tags in created.items()]
        out += [Request(action, resource, {**base, **context}) for resource, context in used]
    out += [Request("ec2:CreateTags", arn(kind), {**base, **_request_tags(tags), "ec2:CreateAction": "CreateFleet"})
            for kind, tags in created.items() if tags]
    return out
