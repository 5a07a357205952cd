"""iam/rows.py: a backend's own rows of the IAM table are data in its folder (`iam_calls.toml`), read without
importing the backend; the shared rows stay in iam/calls.py, and a file written wrong is refused naming itself."""
from __future__ import annotations

import pytest

from trainctl.catalog.platforms import BACKENDS_DIR, NAMES
from trainctl.iam import CALLS, calls_for
from trainctl.iam.constants import TAGGED_REQUEST
from trainctl.iam.rows import CALLS_FILE, backend_calls, calls_in, platform_calls


def test_each_backend_s_rows_come_from_its_own_file_and_are_its_alone():
    for platform in NAMES:
        own = platform_calls(platform)
        assert own and all(call.platforms == (platform,) for call in own)
        assert all(call in calls_for(platform) for call in own)
        assert not any(call in calls_for(other) for other in NAMES if other != platform for call in own)
    mine = backend_calls()
    assert CALLS[-len(mine):] == mine   # after the shared rows, in the platforms' order
    # the rows left in iam/calls.py are those every platform needs: none names one platform alone
    assert all(call.platforms == NAMES for call in CALLS[:-len(mine)])


def test_a_named_condition_is_the_shared_one_and_a_written_one_is_kept_as_written():
    create = next(c for c in platform_calls("sagemaker") if c.operation == "sagemaker:CreateTrainingJob")
    assert create.grants[0].condition is TAGGED_REQUEST
    assert create.grants[1].condition == {"StringEquals": {"iam:PassedToService": "sagemaker.amazonaws.com"}}
    assert create.grants[1].resources == ("arn:aws:iam::*:role/trainctl/*", "arn:aws:iam::*:role/{execution_role}")


def test_the_template_s_example_reads_as_rows():
    rows = calls_in(BACKENDS_DIR / "template" / f"{CALLS_FILE}.example", "template")
    assert rows and all(call.platforms == ("template",) and call.grants for call in rows)


@pytest.mark.parametrize("text,message", [
    ('[[call]]\noperation = "s3:GetObject"\n[[call.grant]]\nactions = ["s3:GetObject"]\ncondition = "tagged"\n',
     "condition 'tagged' is none of tagged-request"),
    ('[[call]]\noperation = "s3:GetObject"\n[[call.grant]]\nresources = ["*"]\n', "actions \\(required\\)"),
    ('[[call]]\noperation = "s3:GetObject"\n[[call.grant]]\nactions = ["s3:GetObject"]\nresource = ["*"]\n',
     "not \\['resource'\\]"),
    ('[[call]]\noperator = "s3:GetObject"\n', "names its operation as 'service:Operation'"),
])
def test_a_rows_file_written_wrong_is_refused_naming_the_file(tmp_path, text, message):
    path = tmp_path / CALLS_FILE
    path.write_text(text)
    with pytest.raises(ValueError, match=message) as refused:
        calls_in(path, "batch")
    assert str(path) in str(refused.value)
