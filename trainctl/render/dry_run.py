"""`launch --dry-run` for people: a summary that fits the terminal (the option, its cost and time, the settings
that reach the job, one line per AWS call with its key parameters, the alternatives, what prepare decided).
The full requests stay in `-o json`. Pure: a dry-run document in, lines out."""
from __future__ import annotations

import re
import textwrap
from typing import Any

# The parameters that tell one call from another, per operation (dotted paths into `params`; a number is a
# list index). An operation not listed shows its first scalar parameters.
KEY_PARAMS: dict[str, tuple[str, ...]] = {
    "PutBucketEncryption": ("Bucket", "ServerSideEncryptionConfiguration.Rules.0.ApplyServerSideEncryptionByDefault"
                                      ".SSEAlgorithm"),
    "PutPublicAccessBlock": ("Bucket",),
    "PutBucketLifecycleConfiguration": ("Bucket",),
    "PutRetentionPolicy": ("retentionInDays",),
    "PutObject": ("Bucket", "Key", "Body.bytes"),
    "CreateRole": ("RoleName",),
    "PutRolePolicy": ("RoleName", "PolicyName"),
    "CreateInstanceProfile": ("InstanceProfileName",),
    "AddRoleToInstanceProfile": ("InstanceProfileName", "RoleName"),
    "CreateSecurityGroup": ("GroupName", "VpcId"),
    "AuthorizeSecurityGroupIngress": ("GroupId",),
    "CreatePlacementGroup": ("GroupName", "Strategy"),
    "CreateLaunchTemplate": ("LaunchTemplateName", "LaunchTemplateData.ImageId", "LaunchTemplateData.InstanceType",
                             "LaunchTemplateData.MetadataOptions.HttpTokens"),
    "CreateFleet": ("TargetCapacitySpecification.TotalTargetCapacity",
                    "TargetCapacitySpecification.DefaultTargetCapacityType",
                    "LaunchTemplateConfigs.0.Overrides.0.InstanceType", "LaunchTemplateConfigs.0.Overrides.0.SubnetId",
                    # a flexible layout's fleet only: its hard cap per hour
                    "SpotOptions.MaxTotalPrice", "OnDemandOptions.MaxTotalPrice"),
    "CreateTrainingJob": ("TrainingJobName", "ResourceConfig.InstanceType", "ResourceConfig.InstanceCount",
                          "EnableManagedSpotTraining", "StoppingCondition.MaxRuntimeInSeconds",
                          "StoppingCondition.MaxWaitTimeInSeconds", "VpcConfig.Subnets"),
}
_FALLBACK_KEYS = 3
JOB = "JOB"  # how the calls write the job id, which most names contain


def _lookup(params: Any, path: str) -> Any:
    value = params
    for part in path.split("."):
        if isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        elif isinstance(value, dict) and part in value:
            value = value[part]
        else:
            return None
    return value


def _show(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, list):
        return ",".join(_show(v) for v in value)
    return str(value)


def key_params(operation: str, params: dict) -> list[tuple[str, str]]:
    """(name, value) of the parameters that matter for people, in a stable order."""
    paths = KEY_PARAMS.get(operation) or tuple(k for k, v in params.items()
                                               if isinstance(v, (str, int, float, bool)))[:_FALLBACK_KEYS]
    out = []
    for path in paths:
        value = _lookup(params, path)
        if value is not None:
            name = path.rsplit(".", 1)[-1] if not path.endswith(".bytes") else "bytes"
            out.append((name, _show(value)))
    return out


_LIST = re.compile(r"(?:[\w./-]+, ){4,}[\w./-]+")


def abbreviate_lists(text: str, keep: int = 3) -> str:
    """A run of five or more names ("a.py, b.py, ...") becomes the first three and how many more."""
    def short(m: re.Match) -> str:
        items = m.group(0).split(", ")
        return f"{', '.join(items[:keep])} and {len(items) - keep} more"

    return _LIST.sub(short, text)


def call_line(n: int, request: dict, job_id: str) -> str:
    keys = " ".join(f"{k}={v}" for k, v in key_params(request["operation"], request["params"]))
    line = f"{n:>2}. {request['service']}:{request['operation']} {keys}".rstrip()
    if request.get("why"):
        line += f" - {abbreviate_lists(request['why'])}"
    return line.replace(job_id, JOB) if job_id else line


def _money(x: Any) -> str:
    return "-" if x is None else f"${x:,.2f}"


def _hours(x: Any) -> str:
    return "-" if x is None else f"{x:,.1f} h"


def option_lines(o: dict) -> list[str]:
    where = o.get("availability_zone") or o.get("region")
    p90 = f", p90 {_money(o.get('cost_p90_usd'))} / {_hours(o.get('hours_p90'))}" if o.get("cost_p90_usd") else ""
    return [f"option: #{o['rank']} {o['count']}x {o.get('flexible_group') or o['instance_type']} {o['market']} on {o['platform']} in {where}",
            f"cost: {_money(o['expected_cost_usd'])} expected over {_hours(o['hours'])}{p90}; "
            f"{_money(o['hourly_usd'])}/h for the layout"]


def settings_lines(settings: dict | None) -> list[str]:
    if not settings:
        return []
    steps = settings.get("steps")
    line = (f"job: {settings['entrypoint']}, {settings['precision']}, batch {settings['batch_size_per_accelerator']} "
            f"per accelerator, {settings['strategy']}, checkpoint every {settings['checkpoint_interval_minutes']:g} "
            f"min, {steps if steps is not None else 'its own'} steps")
    args = " ".join(f"--{k} {_show(v)}" for k, v in settings.get("args", {}).items())
    return [line] + ([f"args: {args}"] if args else [])


def calls_lines(doc: dict, full: str = "-o json prints the full requests") -> list[str]:
    """The numbered AWS calls with their key parameters, then the alternatives groups."""
    job_id = doc["job_id"]
    lines = [f"{len(doc['requests'])} AWS calls, in order ({JOB} = {job_id}; {full}):"]
    lines += [call_line(n, r, job_id) for n, r in enumerate(doc["requests"], 1)]
    for group in doc.get("alternatives", []):
        members = sum(r.get("alternative_of") == group["group"] for r in doc["requests"])
        lines.append(f"alternatives ({group['group']}, {members} calls): the first whose answer is accepted "
                     f"({group['accept']}) ends the group; otherwise {group['otherwise']}")
    return lines


def summary_lines(doc: dict) -> list[str]:
    """Every line of the summary, unwrapped (each is one fact; `wrap` fits them to a width)."""
    lines = [f"dry run of {doc['job_id']} on {doc['platform']}: nothing is created"]
    lines += option_lines(doc["option"]) + settings_lines(doc.get("job_settings")) + calls_lines(doc)
    return lines + [f"- {abbreviate_lists(note)}" for note in doc.get("notes", [])]


def wrap(lines: list[str], width: int) -> str:
    """Each line wrapped at `width` between words, its continuation indented under its text; a word wider than the
    line (a long path or image name) gets a line of its own, whole: the terminal wraps it, a copy pastes it whole.
    Each line is cleaned of control characters first (notes and calls carry names from the user's files)."""
    from trainctl.text.safe import clean

    out = []
    for line in (clean(raw, one_line=True) for raw in lines):
        stripped = line.lstrip()
        lead = len(line) - len(stripped)
        first = stripped.split(" ", 1)[0]
        marker = first if first == "-" or (first.endswith(".") and first[:-1].isdigit()) else ""
        indent = " " * (lead + len(marker) + 1 if marker else lead + 2)
        out.append(textwrap.fill(line, width=max(40, width), subsequent_indent=indent, break_on_hyphens=False,
                                 break_long_words=False,  # an id, a key or a path is never cut in two
                                 drop_whitespace=True) if len(line) > width else line)
    return "\n".join(out)
