"""The small IAM evaluator of tests/support/policy_eval.py against the rules of AWS's policy evaluation logic."""
from __future__ import annotations

import pytest

from tests.support.policy_eval import Request, decide

ACCOUNT = {"aws:PrincipalAccount": "111122223333"}


def doc(*statements: dict) -> dict:
    return {"Version": "2012-10-17", "Statement": list(statements)}


def allow(action, resource="*", condition=None, **extra) -> dict:
    st = {"Effect": "Allow", "Action": action, "Resource": resource, **extra}
    if condition:
        st["Condition"] = condition
    return st


def test_nothing_allowed_is_an_implicit_deny_and_an_explicit_deny_wins():
    r = Request("s3:GetObject", "arn:aws:s3:::b/k")
    assert decide(r, [doc()]) == "ImplicitDeny"
    assert decide(r, [doc(allow("s3:GetObject"))]) == "Allow"
    deny = {"Effect": "Deny", "Action": "s3:*", "Resource": "*"}
    assert decide(r, [doc(allow("s3:GetObject")), doc(deny)]) == "ExplicitDeny"


def test_action_wildcards_are_case_insensitive_resources_case_sensitive():
    p = [doc(allow("S3:Get*", "arn:aws:s3:::b/dir/*"))]
    assert decide(Request("s3:getobject", "arn:aws:s3:::b/dir/x/y"), p) == "Allow"
    assert decide(Request("s3:PutObject", "arn:aws:s3:::b/dir/x"), p) == "ImplicitDeny"
    assert decide(Request("s3:GetObject", "arn:aws:s3:::b/DIR/x"), p) == "ImplicitDeny"
    not_action = [doc({"Effect": "Allow", "NotAction": "iam:*", "Resource": "*"})]
    assert decide(Request("s3:GetObject", "x"), not_action) == "Allow"
    assert decide(Request("iam:CreateRole", "x"), not_action) == "ImplicitDeny"


def test_policy_variables_are_filled_from_the_request():
    p = [doc(allow("s3:GetObject", "arn:aws:s3:::b/*",
                   {"StringEquals": {"s3:ResourceAccount": "${aws:PrincipalAccount}"}}))]
    mine = Request("s3:GetObject", "arn:aws:s3:::b/k", {**ACCOUNT, "s3:ResourceAccount": "111122223333"})
    theirs = Request("s3:GetObject", "arn:aws:s3:::b/k", {**ACCOUNT, "s3:ResourceAccount": "999988887777"})
    assert decide(mine, p) == "Allow" and decide(theirs, p) == "ImplicitDeny"
    # a variable the request lacks: the statement cannot match
    assert decide(Request("s3:GetObject", "arn:aws:s3:::b/k", {"s3:ResourceAccount": "1"}), p) == "ImplicitDeny"


def test_missing_keys_fail_positive_operators_and_pass_negated_ones():
    key = "iam:PermissionsBoundary"
    positive = [doc(allow("iam:CreateRole", condition={"StringEquals": {key: "arn:b"}}))]
    negated = [doc(allow("iam:CreateRole", condition={"StringNotEquals": {key: "arn:b"}}))]
    if_exists = [doc(allow("iam:CreateRole", condition={"StringEqualsIfExists": {key: "arn:b"}}))]
    bare = Request("iam:CreateRole", "r")
    assert decide(bare, positive) == "ImplicitDeny"
    assert decide(bare, negated) == "Allow"
    assert decide(bare, if_exists) == "Allow"
    assert decide(Request("iam:CreateRole", "r", {key: "arn:other"}), if_exists) == "ImplicitDeny"


def test_null_stringlike_forallvalues_and_several_values():
    tagged = [doc(allow("ec2:CreateFleet", condition={"Null": {"aws:RequestTag/trainctl:job": "false"}}))]
    assert decide(Request("ec2:CreateFleet", "f", {"aws:RequestTag/trainctl:job": "j"}), tagged) == "Allow"
    assert decide(Request("ec2:CreateFleet", "f"), tagged) == "ImplicitDeny"
    like = [doc(allow("s3:ListBucket", condition={"StringLike": {"s3:prefix": ["a/*", "b/*"]}}))]
    assert decide(Request("s3:ListBucket", "b", {"s3:prefix": "b/x"}), like) == "Allow"
    assert decide(Request("s3:ListBucket", "b", {"s3:prefix": "c/x"}), like) == "ImplicitDeny"
    only = [doc(allow("ec2:CreateTags", condition={"ForAllValues:StringEquals": {"aws:TagKeys": ["s"]}}))]
    assert decide(Request("ec2:CreateTags", "i", {"aws:TagKeys": ["s"]}), only) == "Allow"
    assert decide(Request("ec2:CreateTags", "i", {"aws:TagKeys": ["s", "trainctl:job"]}), only) == "ImplicitDeny"


def test_a_boundary_limits_what_the_identity_policy_allows():
    admin = [doc(allow("*"))]
    boundary = doc(allow("s3:GetObject", "arn:aws:s3:::b/*"))
    assert decide(Request("s3:GetObject", "arn:aws:s3:::b/k"), admin, boundary) == "Allow"
    assert decide(Request("iam:CreateUser", "u"), admin, boundary) == "ImplicitDeny"
    assert decide(Request("s3:GetObject", "arn:aws:s3:::b/k"), [doc()], boundary) == "ImplicitDeny"


def test_an_operator_it_does_not_know_is_an_error_not_a_pass():
    p = [doc(allow("s3:GetObject", condition={"NumericLessThan": {"s3:max-keys": "10"}}))]
    with pytest.raises(ValueError):
        decide(Request("s3:GetObject", "x", {"s3:max-keys": "5"}), p)
