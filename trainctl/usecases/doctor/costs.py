"""`doctor`'s check of the `trainctl:job` cost allocation tag: without it active, Cost Explorer cannot say what a
job was billed (`trainctl cost` shows predicted and running dollars only).

A user-defined tag is listed by Cost Explorer once a resource carries it (up to 24 hours after), Inactive until
the account's management (payer) account activates it; it then applies to costs from that time on (AWS Billing
User Guide, "Activating user-defined cost allocation tags"). A missing activation does not stop a launch, so
this check warns rather than fails.
"""
from __future__ import annotations

from trainctl.aws import clients as aws
from trainctl.naming.tags import JOB_TAG

NAME = "cost allocation tag"
ACTIVATE = (f"aws ce update-cost-allocation-tags-status --cost-allocation-tags-status "
            f"TagKey={JOB_TAG},Status=Active")


def check_cost_allocation_tag() -> tuple[str, str, str, str]:
    """(check name, pass|warn|skip, what was found, the fix): doctor's Check fields (no import of doctor: no cycle)."""
    from trainctl.catalog.regions import ce_region

    where = ce_region(aws.default_region())   # Cost Explorer's one endpoint of the caller's partition
    if where is None:
        return (NAME, "skip", f"Cost Explorer has no endpoint in the partition of {aws.default_region()}", "")
    try:
        found = aws.client("ce", where).list_cost_allocation_tags(TagKeys=[JOB_TAG], Type="UserDefined")
    except Exception as e:  # noqa: BLE001 - no Cost Explorer access: nothing to say about the tag
        return (NAME, "skip", f"Cost Explorer did not answer ({aws.error_summary(e)}); `trainctl cost` needs "
                             "ce:GetCostAndUsage for billed dollars", "")
    tags = [t for t in found.get("CostAllocationTags", []) if t.get("TagKey") == JOB_TAG]
    if not tags:
        return (NAME, "warn", f"{JOB_TAG} is not listed yet: Cost Explorer lists a tag up to 24 hours after a "
                                   "resource first carries it (after the first launch)",
                     f"then activate it once for the account: {ACTIVATE}")
    if tags[0].get("Status") != "Active":
        return (NAME, "warn", f"{JOB_TAG} is Inactive: Cost Explorer cannot say what each job was billed "
                                   "(`trainctl cost` shows predicted and running dollars only)",
                     f"activate it once for the account (the management account in an organization): {ACTIVATE}")
    return (NAME, "pass", f"{JOB_TAG} is active: `trainctl cost` shows billed dollars (a day behind)", "")
