"""Loading a job spec: read the YAML, validate it with `JobSpec`, and turn every problem into one printable
line naming the file, the line, the field and the fix (exit code 2)."""
from __future__ import annotations

import difflib
import re
import sys
from pathlib import Path

from pydantic import BaseModel, ValidationError

from trainctl.spec.flexible import is_flexible, members
from trainctl.errors import UsageError
from trainctl.spec.model import MAX_SPEC_BYTES, JobSpec, _clip, bundled_arg_problem

def _yaml_line(text: str, loc: tuple) -> int | None:
    """Best-effort line number of a field path in the YAML source (yaml's node marks)."""
    import yaml

    try:
        node = yaml.compose(text)
    except yaml.YAMLError:
        return None
    line = None
    for key in loc:
        if isinstance(node, yaml.MappingNode):
            for k, v in node.value:
                if k.value == str(key):
                    line, node = k.start_mark.line + 1, v
                    break
            else:
                return line
        elif isinstance(node, yaml.SequenceNode) and isinstance(key, int) and key < len(node.value):
            node = node.value[key]
            line = node.start_mark.line + 1
        else:
            return line
    return line


def _model_at(loc: tuple):
    """The pydantic model class that holds the last key of `loc` (JobSpec at the top), or None."""
    import typing

    model = JobSpec
    for key in loc[:-1]:
        field = model.model_fields.get(str(key)) if isinstance(model, type) else None
        if field is None:
            return None
        inner = [t for t in (field.annotation, *typing.get_args(field.annotation))
                 if isinstance(t, type) and issubclass(t, BaseModel)]
        if not inner:
            return None
        model = inner[0]
    return model


def _describe(err: dict) -> str:
    kind, msg, loc = err["type"], err["msg"], tuple(err["loc"])
    model = _model_at(loc)
    fields = list(model.model_fields) if model is not None else []
    if kind == "extra_forbidden":
        close = difflib.get_close_matches(str(loc[-1]), fields, n=1, cutoff=0.6)
        hint = f"did you mean '{close[0]}'?" if close else f"known keys here: {', '.join(fields)}" if fields \
            else "check its spelling"
        return f"unknown key; {hint} (`trainctl schema` lists every key)"
    if kind == "missing":
        return "required field is missing"
    if kind == "string_pattern_mismatch":
        field = model.model_fields.get(str(loc[-1])) if model is not None else None
        wanted = field.description if field is not None and field.description else "a different form"
        return f"{_clip(err.get('input'))} is not allowed here; use {wanted}"
    return msg.removeprefix("Value error, ")


def _first_error(errors: list[dict]) -> dict:
    """The error a user should see first: a misspelt key explains the 'missing' field it leaves behind."""
    return next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])


def _printable(message: str, limit: int = 400) -> str:
    """One line of printable text: control characters (a YAML key may hold a newline) are escaped."""
    out = "".join(c if c.isprintable() else repr(c)[1:-1] for c in message)
    return out if len(out) <= limit else out[:limit - 3] + "..."


def load_spec(path: str | Path, *, catalog=None) -> JobSpec:
    """Load and validate a job spec; with a catalog, also check instance types and families against it.

    Every rejection is a UsageError of one printable line (exit code 2), whatever the file holds."""
    try:
        return _load_spec(path, catalog)
    except UsageError as e:
        raise UsageError(_printable(str(e))) from e
    except RecursionError:
        raise UsageError(_printable(f"{path}: the YAML is nested too deeply to be a job spec")) from None


def _load_spec(path: str | Path, catalog) -> JobSpec:
    p = Path(path)
    text, raw = _read_yaml(p)
    try:
        spec = JobSpec.model_validate(raw)
    except ValidationError as e:
        err = _first_error(e.errors())
        loc = tuple(err["loc"])
        field = ".".join(str(x) for x in loc) or "(top level)"
        line = _yaml_line(text, loc)
        where = f"{p}:{line}" if line else str(p)
        more = f" (and {e.error_count() - 1} more problem{'s' if e.error_count() > 2 else ''})" \
            if e.error_count() > 1 else ""
        raise UsageError(f"{where}: field '{field}': {_describe(err)}{more}") from e
    _check_entrypoint_args(spec, text, p)
    _warn_secret_like_args(spec, text, p)
    _check_architecture(spec, text, p)
    _check_regions(spec, text, p)
    if catalog is not None:
        _check_against_catalog(spec, text, p, catalog)
    return spec


def _read_yaml(p: Path) -> tuple[str, dict]:
    """(the text, the parsed mapping) of a spec file; anything else is one line saying what is wrong."""
    import yaml

    try:
        is_file = p.is_file()
    except (OSError, ValueError):  # a name too long for the file system, or one with a NUL byte
        is_file = False
    if not is_file:
        raise UsageError(f"{p}: no such job spec file; give the path of a YAML file such as configs/vit-base-g5.yaml")
    try:
        if p.stat().st_size > MAX_SPEC_BYTES:
            raise UsageError(f"{p}: {p.stat().st_size} bytes is too large for a job spec (at most "
                             f"{MAX_SPEC_BYTES // 1024} KiB); is it the right file?")
        text = p.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"{p}: cannot read the job spec ({e.__class__.__name__}: {e})") from e
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f":{mark.line + 1}" if mark else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise UsageError(f"{p}{where}: YAML syntax error: {problem}; fix the YAML at that line") from e
    except RecursionError:
        raise
    except Exception as e:  # noqa: BLE001
        # PyYAML's constructors raise ValueError, KeyError, AttributeError... for scalars that match a type
        # but do not parse: `0x_`, `0b`, `!!bool maybe`, `!!timestamp 2001-13-40`, `!!timestamp :`, `!!float .`
        raise UsageError(f"{p}: YAML value that cannot be read ({e.__class__.__name__}: {e}); quote it "
                         "if it is a string, or fix the number or date") from e
    if raw is None:
        raise UsageError(f"{p}: the job spec is empty; write a YAML mapping with name:, entrypoint:, model: and "
                         "workload: (see configs/vit-base-g5.yaml, or `trainctl schema`)")
    if not isinstance(raw, dict):
        raise UsageError(f"{p}: a job spec is a YAML mapping (name:, entrypoint:, model:, workload:, ...), "
                         f"not {_KINDS.get(type(raw).__name__, 'a single value')}")
    return text, raw


_KINDS = {"list": "a list", "str": "a single string", "int": "a number", "float": "a number", "bool": "true/false"}


def _check_against_catalog(spec: JobSpec, text: str, p: Path, catalog) -> None:
    known_instance_types = set(catalog.instances)
    for i, family in enumerate(spec.candidates.families):
        if family not in catalog.families:
            line = _yaml_line(text, ("candidates", "families", i))
            raise UsageError(f"{p}{':' + str(line) if line else ''}: field 'candidates.families.{i}': unknown "
                             f"instance family {family!r}; known: {', '.join(catalog.families)}")
    _check_flexible(spec, text, p, catalog)
    for i, layout in enumerate(spec.candidates.layouts):
        if is_flexible(layout.instance_type):
            continue
        if layout.instance_type not in known_instance_types:
            line = _yaml_line(text, ("candidates", "layouts", i))
            raise UsageError(f"{p}{':' + str(line) if line else ''}: field 'candidates.layouts.{i}': unknown "
                             f"instance type {layout.instance_type!r}; `trainctl catalog` lists the known types")
    for key in spec.throughput:
        if key not in known_instance_types and key not in catalog.accelerators:
            raise UsageError(f"{p}: field 'throughput.{key}': not an instance type or accelerator name; use e.g. "
                             "g5.2xlarge or A10G")


def _check_flexible(spec: JobSpec, text: str, p: Path, catalog) -> None:
    """Every flexible layout and every list under candidates.flexible names known types of one accelerator."""
    named = [(("candidates", "layouts", i), lay.instance_type) for i, lay in enumerate(spec.candidates.layouts)
             if is_flexible(lay.instance_type)]
    if isinstance(spec.candidates.flexible, list):
        named += [(("candidates", "flexible", i), "|".join(types)) for i, types in enumerate(spec.candidates.flexible)]
    for where, name in named:
        try:
            members(catalog, name)
        except ValueError as e:
            line = _yaml_line(text, where)
            raise UsageError(f"{p}{':' + str(line) if line else ''}: field '{'.'.join(map(str, where))}': {e}") from None


def _check_entrypoint_args(spec: JobSpec, text: str, p: Path) -> None:
    """One batch size, and bundled-entrypoint arguments the entrypoint will accept: one line with file:line."""
    batch = spec.workload.batch_size_per_accelerator
    for key, value in spec.entrypoint.args.items():
        problem = bundled_arg_problem(key, value, spec.entrypoint.bundled) if spec.entrypoint.bundled else None
        if problem is None and key.replace("_", "-") == "batch-size" and str(value).strip() != str(batch):
            problem = (f"{_clip(value)} disagrees with workload.batch_size_per_accelerator ({batch}), the one batch "
                       "size trainctl plans with and launches; remove the arg (the launch passes the workload's) or "
                       "make them equal")
        if problem is not None:
            line = _yaml_line(text, ("entrypoint", "args", key))
            raise UsageError(f"{p}{':' + str(line) if line else ''}: field 'entrypoint.args.{key}': {problem}")


# An argument named like a credential, or a value in the shape of a well-known token (AWS access key id,
# Hugging Face, GitHub, OpenAI-style, Slack).
SECRET_KEY = re.compile(r"(token|passw(or)?d|secret|api[-_]?key|access[-_]?key|private[-_]?key|credential|auth)",
                        re.IGNORECASE)
SECRET_VALUE = re.compile(r"^(AKIA[0-9A-Z]{16}|hf_[A-Za-z0-9]{30,}|gh[pousr]_[A-Za-z0-9]{30,}|sk-[A-Za-z0-9_-]{20,}"
                          r"|xox[abposr]-[A-Za-z0-9-]{10,})$")
_WARNED: set[tuple[str, str]] = set()


def secret_like_args(spec: JobSpec) -> list[str]:
    """The entrypoint args whose name or value looks like a secret."""
    return [key for key, value in spec.entrypoint.args.items() if isinstance(value, str) and value.strip()
            and (SECRET_KEY.search(key) or SECRET_VALUE.match(value.strip()))]


def _warn_secret_like_args(spec: JobSpec, text: str, p: Path) -> None:
    """A warning on stderr, once per argument: args reach EC2 user data and SageMaker HyperParameters, which
    anyone allowed to describe the job can read."""
    for key in secret_like_args(spec):
        if (str(p), key) in _WARNED:
            continue
        _WARNED.add((str(p), key))
        line = _yaml_line(text, ("entrypoint", "args", key))
        sys.stderr.write(f"trainctl: warning: {p}{':' + str(line) if line else ''}: entrypoint.args.{key} looks like "
                         "a secret; args are readable by anyone who can describe the job: put it in SSM or Secrets "
                         "Manager and name it under `secrets:` (docs/security.md)\n")


def _check_architecture(spec: JobSpec, text: str, p: Path) -> None:
    """A bundled entrypoint trains only the architectures of its list (entrypoints/architectures.txt, which the
    entrypoint reads too): a spec it cannot build fails here, at `plan` and `launch`, not in the container."""
    from trainctl.entrypoints.trainctl_architectures import buildable

    bundled, arch = spec.entrypoint.bundled, spec.model.architecture
    if bundled is None or arch is None:
        return
    lists = buildable()
    known = lists.get(bundled, {})
    if arch not in known:
        others = [name for name, archs in lists.items() if arch in archs]
        fix = f"use entrypoint: {{bundled: {others[0]}}}" if others else "train it with your own script " \
            "(entrypoint: {script: train.py, source_dir: .}; docs/your-script.md)"
        line = _yaml_line(text, ("model", "architecture"))
        raise UsageError(f"{p}{':' + str(line) if line else ''}: field 'model.architecture': the bundled {bundled} "
                         f"entrypoint cannot build {arch!r}; it trains {', '.join(known)}; {fix}")
    for key, value in spec.entrypoint.args.items():
        name = key.replace("_", "-")
        if name in known[arch] and str(value).strip() != known[arch][name]:
            line = _yaml_line(text, ("entrypoint", "args", key))
            raise UsageError(f"{p}{':' + str(line) if line else ''}: field 'entrypoint.args.{key}': {_clip(value)} "
                             f"builds another model than model.architecture {arch!r} (--{name} "
                             f"{known[arch][name]}), which the plan prices; remove the arg (the launch passes "
                             "the architecture's) or change the architecture")


def _check_regions(spec: JobSpec, text: str, p: Path) -> None:
    """candidates.regions are regions botocore knows (us-east-9 has the form of one and would fail mid-plan)."""
    from trainctl.catalog.regions import check_region

    for i, region in enumerate(spec.candidates.regions):
        line = _yaml_line(text, ("candidates", "regions", i))
        check_region(region, where=f"{p}{':' + str(line) if line else ''}: field 'candidates.regions.{i}':")
