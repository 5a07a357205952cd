"""The sandbox refuses EC2 user data over 16 KB before base64 (EC2 User Guide, "Instance user data"), as EC2
does: a launch whose user data outgrew the limit fails here, not first on AWS."""
from __future__ import annotations

import base64

import pytest
from botocore.exceptions import ClientError


def _template(ec2, name: str, raw: bytes):
    return ec2.create_launch_template(LaunchTemplateName=name, LaunchTemplateData={
        "ImageId": "ami-12345678", "UserData": base64.b64encode(raw).decode()})


def test_the_sandbox_refuses_a_launch_template_with_user_data_over_16_kb(sandbox_env):
    ec2 = sandbox_env.client("ec2")
    with pytest.raises(ClientError) as e:
        _template(ec2, "too-big", b"#" * (16 * 1024 + 1))
    assert e.value.response["Error"]["Code"] == "InvalidParameterValue"
    assert "16384" in e.value.response["Error"]["Message"]


def test_the_sandbox_takes_user_data_of_exactly_16_kb(sandbox_env):
    ec2 = sandbox_env.client("ec2")
    assert _template(ec2, "just-fits", b"#" * (16 * 1024))["LaunchTemplate"]["LaunchTemplateName"] == "just-fits"
