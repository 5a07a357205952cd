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
from trainctl.spec.entrypoint_args import bundled_arg_problem
from trainctl.spec.model import MAX_SPEC_BYTES, JobSpec, _clip

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


def _more(errors: list[dict], shown: dict, text: str) -> str:
    """The other problems, named by field and line (up to three), so one run shows what else to fix."""
    rest = [e for e in errors if e is not shown]
    if not rest:
        return ""
    named = []
    for e in rest[:3]:
        loc = tuple(e["loc"])
        line = _yaml_line(text, loc)
        named.append(f"'{'.'.join(str(x) for x in loc) or '(top level)'}'" + (f" (line {line})" if line else ""))
    extra = f" and {len(rest) - 3} more" if len(rest) > 3 else ""
    return f" (also {', '.join(named)}{extra}: {len(rest)} more problem{'s' if len(rest) > 1 else ''})"


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
    raw = _with_hf_config(raw, text, p)
    try:
        spec = JobSpec.model_validate(raw)
    except ValidationError as e:
        errors = e.errors()
        err = _first_error(errors)
        loc = tuple(err["loc"])
        field = ".".join(str(x) for x in loc) or "(top level)"
        line = _yaml_line(text, loc)
        where = f"{p}:{line}" if line else str(p)
        raise UsageError(f"{where}: field '{field}': {_describe(err)}{_more(errors, err, text)}") from e
    _check_entrypoint_args(spec, text, p)
    _warn_secret_like_args(spec, text, p)
    _check_architecture(spec, text, p)
    _check_regions(spec, text, p)
    if catalog is not None:
        _check_against_catalog(spec, text, p, catalog)
    return spec


def _with_hf_config(raw: dict, text: str, p: Path) -> dict:
    """model.config: a Hugging Face config.json on disk (relative to the spec file) fills the model's shape fields;
    fields the spec gives itself (seq_len: the training length, often shorter than max_position_embeddings) win."""
    import json

    from trainctl.spec.architectures import from_hf_config

    model = raw.get("model")
    if not isinstance(model, dict) or not isinstance(model.get("config"), str):
        return raw
    line = _yaml_line(text, ("model", "config"))
    where = f"{p}{':' + str(line) if line else ''}: field 'model.config'"
    path = (p.parent / model["config"]).resolve()
    try:
        if path.stat().st_size > MAX_SPEC_BYTES:
            raise UsageError(f"{where}: {path} is larger than {MAX_SPEC_BYTES} bytes; give the model's config.json")
        shape = from_hf_config(json.loads(path.read_text()))
    except FileNotFoundError:
        raise UsageError(f"{where}: no such file {path}; give the path of your model's config.json, relative to "
                         "the spec file") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise UsageError(f"{where}: cannot read {path} as JSON ({e.__class__.__name__}); give the model's "
                         "Hugging Face config.json") from None
    except ValueError as e:
        raise UsageError(f"{where}: {path}: {e}; give the shape in the spec instead (model.layers, hidden, heads, "
                         "seq_len)") from None
    return {**raw, "model": {**shape, **model}}


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
    from trainctl.spec.yaml_strict import load

    try:
        raw = load(text)  # safe_load, refusing a key given twice
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
                             f"instance family {family!r}; {_did_you_mean(str(family), catalog.families)}known: "
                             f"{', '.join(catalog.families)}")
    _check_flexible(spec, text, p, catalog)
    for i, layout in enumerate(spec.candidates.layouts):
        if is_flexible(layout.instance_type):
            continue
        if layout.instance_type not in known_instance_types:
            line = _yaml_line(text, ("candidates", "layouts", i))
            raise UsageError(f"{p}{':' + str(line) if line else ''}: field 'candidates.layouts.{i}': unknown "
                             f"instance type {layout.instance_type!r}; "
                             f"{_did_you_mean(layout.instance_type, sorted(known_instance_types))}"
                             "`trainctl catalog` lists the known types")
    for key in spec.throughput:
        if key not in known_instance_types and key not in catalog.accelerators:
            raise UsageError(f"{p}: field 'throughput.{key}': not an instance type or accelerator name; use e.g. "
                             "g5.2xlarge or A10G")


def did_you_mean(name: str, known: list[str]) -> str:
    """'did you mean 'g5'? ' for G5, 'p4d' for p4: case folded, then a known name it begins, then spelling."""
    import difflib

    folded = name.strip().lower()
    by_fold = {k.lower(): k for k in known}
    close = ([by_fold[folded]] if folded in by_fold else
             [k for k in known if k.lower().startswith(folded)][:3] if folded else [])
    close = close or difflib.get_close_matches(folded, list(by_fold), n=2, cutoff=0.6)
    close = [by_fold.get(c, c) for c in close]
    return f"did you mean {' or '.join(repr(c) for c in close)}? " if close else ""


_did_you_mean = did_you_mean
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
