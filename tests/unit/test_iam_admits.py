"""trainctl/iam/admits.py: whether a policy lets an action on a resource through, read as IAM reads Action and
Resource, on the boundary trainctl prints."""
from __future__ import annotations

from trainctl.iam.admits import allows
from trainctl.iam.boundary import boundary_policy


def test_the_boundary_admits_a_data_bucket_only_once_named():
    plain, named = boundary_policy(), boundary_policy(("my-datasets",))
    for action, resource in (("s3:GetObject", "arn:aws:s3:::my-datasets/imagenet/x"),
                             ("s3:ListBucket", "arn:aws:s3:::my-datasets")):
        assert not allows(plain, action, resource)
        assert allows(named, action, resource)
    assert not allows(named, "s3:GetObject", "arn:aws:s3:::other-datasets/x")
    assert not allows(named, "s3:PutObject", "arn:aws:s3:::my-datasets/x")  # read-only


def test_actions_match_without_case_resources_with_case_and_variables_stand_for_any_value():
    policy = {"Statement": [{"Effect": "Allow", "Action": "S3:Get*",
                             "Resource": "arn:aws:s3:::trainctl-${aws:PrincipalAccount}/*"}]}
    assert allows(policy, "s3:GetObject", "arn:aws:s3:::trainctl-123/k")
    assert not allows(policy, "s3:GetObject", "arn:aws:s3:::Trainctl-123/k")
    deny = {"Statement": [*policy["Statement"], {"Effect": "Deny", "Action": "s3:*", "Resource": "*"}]}
    assert not allows(deny, "s3:GetObject", "arn:aws:s3:::trainctl-123/k")
