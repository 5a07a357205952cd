"""`trainctl iam-policy`: the least-privilege policies trainctl needs (trainctl/iam/)."""
from __future__ import annotations

import typer

from trainctl.catalog.platforms import NAMES
from trainctl.cli.app import OPTS, app


@app.command("iam-policy")
def iam_policy(
    platform: str = typer.Option("all", "--platform", help=f"{', '.join(NAMES)} or all: the calls of which "
                                                            "backends."),
    role: str = typer.Option("cli", "--role", help="cli (whoever runs trainctl), viewer (read-only: the account's "
                                                   "jobs), sagemaker-execution (a SageMaker job's own role), "
                                                   "ec2-node (an EC2 job's nodes' role) or "
                                                   "boundary (the most any of those may do)."),
    execution_role: str = typer.Option("trainctl-sagemaker-execution", "--execution-role",
                                       help="A role of yours the cli policy may pass to SageMaker "
                                            "(launch --role), besides each job's own role."),
    data_bucket: list[str] = typer.Option([], "--data-bucket", help="A bucket your jobs' data: channels read "
                                          "(repeatable): the cli policy may check it, the boundary lets job roles "
                                          "read it."),
    split: bool = typer.Option(False, "--split", help="Print a JSON list of policies, each under the 6,144 "
                                                      "characters of a managed policy; attach them all."),
) -> None:
    """Print the least-privilege IAM policies trainctl needs."""
    import json as _json

    from trainctl import iam, render
    from trainctl.aws import clients as aws
    from trainctl.naming.resources import partition

    # ARNs carry the partition of the region asked (--region): aws, aws-cn or aws-us-gov
    doc = iam.in_partition(iam.documents(platform, role, execution_role, tuple(data_bucket)), partition(aws.default_region()))
    size = iam.policy_size(doc["policy"])
    say = lambda message: render.stderr_console().print(message, markup=False, soft_wrap=True)  # noqa: E731
    if split:
        doc["policies"] = iam.split_policy(doc.pop("policy"))
        if OPTS.output != "json":
            typer.echo(_json.dumps(doc["policies"], indent=2))
            say(f"{len(doc['policies'])} policies of at most {iam.MANAGED_POLICY_LIMIT:,} characters "
                             "each (whitespace not counted): attach them all (jq '.[0]', '.[1]', ...)")
            return
    elif size > iam.MANAGED_POLICY_LIMIT:
        say(f"warning: this policy is {size:,} characters (whitespace not counted), over the "
                         f"{iam.MANAGED_POLICY_LIMIT:,} of a managed policy: --split prints "
                         f"{len(iam.split_policy(doc['policy']))} that fit, or put it inline on a role (10,240)")
    if OPTS.output == "json":
        render.print_json(doc)
    else:  # the policy itself, ready for `aws iam put-role-policy --policy-document file://...`
        typer.echo(_json.dumps(doc["policy"], indent=2))
        if "trust_policy" in doc:
            render.stderr_console().print("trust policy (--output json shows it with the policy): "
                                          + _json.dumps(doc["trust_policy"]), markup=False, soft_wrap=True)
