"""A launch as data: the exact AWS write calls `prepare` returns, and the one executor that runs them.

What `--dry-run` prints is what `submit` runs, because both read the same `LaunchRequest`:
- plain calls run in order; a later call may use an earlier call's result through a `${name}` placeholder
  (the earlier call declares `outputs={"name": "Json.Path"}`);
- `ok_errors` are AWS error codes that mean "already done" (a re-run); a `fallback` read then supplies the
  outputs the call would have given (e.g. the id of the security group made by the first run);
- consecutive calls that name the same `alternative_of` group are alternatives (EC2: one fleet per AZ):
  the first is made; the backend's declared acceptance check judges the answer; a rejected answer is
  compensated (what it got is given back) and the next alternative is made. When none is accepted the
  launch fails with `CapacityError`. The group's declaration (check and compensation, in words) is part
  of the request, so `--dry-run` shows it.
"""
from __future__ import annotations

import hashlib
import re
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from trainctl.plans import Option

PLACEHOLDER = re.compile(r"\$\{([a-zA-Z0-9_]+)\}")
# The calls after whose sending a job may run (and bill): a launch that fails or is interrupted once one of
# them went out without AWS refusing it cannot say the job did not start.
JOB_STARTING = ("CreateTrainingJob", "CreateFleet", "RunInstances")


class CapacityError(Exception):
    """The layout could not get capacity (insufficient capacity, Spot wait exceeded): failover may move on."""


class NotOurs(Exception):
    """An "already done" answer names a resource that another job or user owns: never adopted, never cleaned."""


@dataclass(frozen=True)
class Retry:
    """Ask again, with a doubling delay, while AWS answers `code` with `message` in its text: a refusal that
    passes (IAM's eventual consistency: a role made seconds ago that SageMaker cannot assume yet)."""

    code: str
    message: str
    attempts: int       # calls in all, the first included
    delay_s: float      # before the second call; doubled after each refusal

    def matches(self, exc: BaseException) -> bool:
        resp = getattr(exc, "response", None)
        error = resp.get("Error", {}) if isinstance(resp, dict) else {}
        return error.get("Code") == self.code and self.message in str(error.get("Message", ""))


@dataclass(frozen=True)
class AwsCall:
    service: str                  # boto3 client name: "sagemaker", "ec2", "s3", "iam", "logs", ...
    operation: str                # API operation name, e.g. "CreateTrainingJob"
    params: dict[str, Any]        # exactly what is passed to boto3 (after ${placeholders} are filled in)
    region: str
    # name -> dotted path into the response (e.g. {"security_group_id": "GroupId"}) for later ${name} use
    outputs: dict[str, str] = field(default_factory=dict)
    # AWS error codes that mean "already done" (idempotent re-run), not failure
    ok_errors: tuple[str, ...] = ()
    # the reads that supply this call's outputs when it ended in one of ok_errors, in order (each may use
    # the ${outputs} of the ones before)
    fallback: "AwsCall | tuple[AwsCall, ...] | None" = None
    why: str = ""                 # one line for people: what this call is for
    alternative_of: str | None = None   # the Alternatives group this call belongs to
    about: dict[str, str] = field(default_factory=dict)  # facts for the acceptance check and people (AZ)
    # (key, value): this read's answer must list the tag, or what it found is not ours (a name taken by
    # someone else) and the "already done" error stands
    owner_tag: tuple[str, str] | None = None
    retry: Retry | None = None    # a transient refusal that this call is asked again for

    def method_name(self) -> str:
        return re.sub(r"(?<!^)(?=[A-Z])", "_", self.operation).lower()

    def to_json(self) -> dict:
        """As printed by --dry-run: bytes params (the code tarball) are summarised by size and sha256;
        the S3 key beside them names the blob."""
        doc: dict[str, Any] = {"service": self.service, "operation": self.operation, "region": self.region,
                               "params": _summarise(self.params)}
        if self.why:
            doc["why"] = self.why
        if self.ok_errors:
            doc["ok_errors"] = list(self.ok_errors)
        if self.fallback:
            doc["fallback"] = [c.to_json() for c in _as_tuple(self.fallback)]
        if self.owner_tag:
            doc["owner_tag"] = f"{self.owner_tag[0]}={self.owner_tag[1]}"
        if self.retry:
            doc["retry"] = {"on": f"{self.retry.code}: {self.retry.message}", "attempts": self.retry.attempts}
        if self.alternative_of:
            doc["alternative_of"] = self.alternative_of
        if self.about:
            doc["about"] = dict(self.about)
        return doc


@dataclass(frozen=True)
class Alternatives:
    """A group of calls of which exactly one must be accepted, tried in order."""

    name: str
    accept: str        # in words: what makes an answer acceptable
    otherwise: str     # in words: what is done with a rejected answer before the next alternative
    exhausted: str     # the start of the CapacityError message when no alternative is accepted

    def to_json(self) -> dict:
        return {"group": self.name, "accept": self.accept, "otherwise": self.otherwise}


@dataclass(frozen=True)
class Verdict:
    """The acceptance check's judgement of one alternative's answer."""

    accepted: bool
    outputs: dict[str, Any] = field(default_factory=dict)
    message: str = ""                    # for people, as it happened
    shortfall: str = ""                  # for the CapacityError when every alternative is rejected
    retry_with: dict | None = None       # ask the same alternative again with these params (transient refusal)


@dataclass(frozen=True)
class LaunchRequest:
    platform: str                 # "sagemaker" | "ec2"
    job_id: str
    region: str
    option: "Option"              # the plan option this request launches
    calls: tuple[AwsCall, ...]
    notes: tuple[str, ...] = ()   # what prepare decided and why (AZ, subnet, image, role, ...)
    alternatives: tuple[Alternatives, ...] = ()

    def to_json(self) -> dict:
        doc = {"platform": self.platform, "job_id": self.job_id, "option": self.option.model_dump(mode="json"),
               "requests": [c.to_json() for c in self.calls], "notes": list(self.notes)}
        if self.alternatives:
            doc["alternatives"] = [a.to_json() for a in self.alternatives]
        return doc

    def group(self, name: str) -> Alternatives:
        return next(a for a in self.alternatives if a.name == name)


@dataclass
class SubmitTrace:
    """What a submit sent, as it happened: each call and its outcome, "in flight" (no answer: it may have
    reached AWS), "done" or "refused: <code>" (AWS answered with an error: it took no effect)."""

    calls: list[tuple[AwsCall, str]] = field(default_factory=list)
    # called once, right before the first job-starting call: the last moment to decide not to start (the
    # launch's duplicate check on AWS); what it raises ends the submit as a failed call would
    before_start: Callable[[], None] | None = None
    # set by a backend whose cleanup after a failed or interrupted submit removed everything, instances included:
    # then nothing runs, even though the job-starting call went out
    cleaned_up: bool = False

    def sending(self, call: AwsCall) -> int:
        if call.operation in JOB_STARTING and self.before_start is not None:
            check, self.before_start = self.before_start, None
            check()
        self.calls.append((call, "in flight"))
        return len(self.calls) - 1

    def answered(self, index: int, error: BaseException | None = None) -> None:
        code = _error_code(error) if error is not None else None
        if error is None or code:
            self.calls[index] = (self.calls[index][0], f"refused: {code}" if code else "done")

    def starting_call(self) -> tuple[AwsCall, str] | None:
        """The job-starting call that went out without a refusal (it runs, or may), or None."""
        return next(((c, o) for c, o in self.calls if c.operation in JOB_STARTING and not o.startswith("refused")),
                    None)

    def created(self) -> list[str]:
        """The write calls AWS carried out, or may have (in flight), for people."""
        return [f"{c.service}:{c.operation}" + (" (in flight)" if o == "in flight" else "")
                for c, o in self.calls if not o.startswith("refused") and not c.operation.startswith(("Describe", "Get", "List"))]


def _as_tuple(fallback: "AwsCall | tuple[AwsCall, ...]") -> tuple["AwsCall", ...]:
    return fallback if isinstance(fallback, tuple) else (fallback,)


def _summarise(value: Any) -> Any:
    if isinstance(value, bytes):
        return {"bytes": len(value), "sha256": hashlib.sha256(value).hexdigest()}
    if isinstance(value, dict):
        return {k: _summarise(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_summarise(v) for v in value]
    return value


def fill_placeholders(value: Any, outputs: dict[str, Any]) -> Any:
    """Replace ${name} strings with values produced by earlier calls."""
    if isinstance(value, str):
        m = PLACEHOLDER.fullmatch(value)
        if m and m.group(1) in outputs:
            return outputs[m.group(1)]
        return PLACEHOLDER.sub(lambda mm: str(outputs.get(mm.group(1), mm.group(0))), value)
    if isinstance(value, dict):
        return {k: fill_placeholders(v, outputs) for k, v in value.items()}
    if isinstance(value, list):
        return [fill_placeholders(v, outputs) for v in value]
    return value


def extract(response: Any, path: str) -> Any:
    value = response
    for part in path.split("."):
        value = value[int(part)] if isinstance(value, list) else value[part]
    return value


def _error_code(exc: BaseException) -> str | None:
    resp = getattr(exc, "response", None)
    return resp.get("Error", {}).get("Code") if isinstance(resp, dict) else None


class Executor:
    """Runs a request's calls as declared. `judge` and `compensate` are the backend's acceptance check and
    compensation for alternatives (the request names the group; the backend knows what it means)."""

    def __init__(self, client_for: Callable[[str, str], Any], judge, compensate, say: Callable[[str], None],
                 trace: SubmitTrace | None = None):
        self.client_for, self.judge, self.compensate, self.say = client_for, judge, compensate, say
        self.trace = trace if trace is not None else SubmitTrace()

    def invoke(self, call: AwsCall, params: dict) -> Any:
        index = self.trace.sending(call)
        try:
            response = getattr(self.client_for(call.service, call.region), call.method_name())(**params)
        except BaseException as e:
            self.trace.answered(index, e)
            raise
        self.trace.answered(index)
        return response

    def run(self, request: LaunchRequest) -> dict[str, Any]:
        outputs: dict[str, Any] = {}
        calls, i = request.calls, 0
        while i < len(calls):
            group = calls[i].alternative_of
            j = i + 1
            while group and j < len(calls) and calls[j].alternative_of == group:
                j += 1
            if group:
                outputs.update(self.run_alternatives(request.group(group), calls[i:j], outputs))
            else:
                outputs.update(self.run_one(calls[i], outputs))
            i = j
        return outputs

    def _announce(self, call: AwsCall) -> None:
        # only the AWS calls say "calling": verdicts and compensations are said as they are
        self.say(f"calling {call.service}:{call.operation}" + (f" ({call.why})" if call.why else ""))

    def run_one(self, call: AwsCall, outputs: dict[str, Any]) -> dict[str, Any]:
        self._announce(call)
        try:
            response = self.invoke_retrying(call, fill_placeholders(call.params, outputs))
        except Exception as e:  # noqa: BLE001 - only the declared "already done" codes are swallowed
            if _error_code(e) not in call.ok_errors:
                raise
            return self.adopt(call, e, outputs)
        self.check_owner(call, response)
        return {name: extract(response, path) for name, path in call.outputs.items()}

    def invoke_retrying(self, call: AwsCall, params: dict) -> Any:
        delay = call.retry.delay_s if call.retry else 0.0
        for attempt in range(call.retry.attempts if call.retry else 1):
            try:
                return self.invoke(call, params)
            except Exception as e:  # noqa: BLE001 - only the declared transient refusal is asked again
                if not (call.retry and call.retry.matches(e)) or attempt == call.retry.attempts - 1:
                    raise
                self.say(f"{call.operation}: {_error_code(e)} (IAM not yet consistent); asking again in {delay:g} s")
                time.sleep(delay)
                delay *= 2

    def adopt(self, call: AwsCall, error: Exception, outputs: dict[str, Any]) -> dict[str, Any]:
        """An "already done" answer (a retry of a call whose first answer was lost, or a re-run): the fallback
        reads supply the outputs, and refuse to adopt what carries another owner's tag."""
        found: dict[str, Any] = {}
        for read in _as_tuple(call.fallback) if call.fallback else ():
            try:
                found.update(self.run_one(read, {**outputs, **found}))
            except NotOurs as e:
                raise NotOurs(f"{call.operation}: {_error_code(error)}: {e}") from error
        if call.fallback:
            self.say(f"{call.operation} was already done: adopting what it made")
        return found

    @staticmethod
    def check_owner(call: AwsCall, response: Any) -> None:
        if call.owner_tag is None:
            return
        key, value = call.owner_tag
        found = {t.get("Key"): t.get("Value") for t in (response or {}).get("Tags", [])}
        if found.get(key) != value:
            raise NotOurs(f"it exists but is not tagged {key}={value} (tagged {key}={found.get(key)!r}): "
                          "another launch or user holds the name")

    def run_alternatives(self, group: Alternatives, calls: tuple[AwsCall, ...], outputs: dict) -> dict[str, Any]:
        shortfalls = []
        for n, call in enumerate(calls):
            self._announce(call)
            params, attempt = fill_placeholders(call.params, outputs), 0
            while True:
                verdict = self.judge(group, call, params, self.invoke(call, params), attempt)
                if verdict.retry_with is None:
                    break
                params, attempt = verdict.retry_with, attempt + 1
            if verdict.accepted:
                self.say(verdict.message)
                return verdict.outputs
            last = n == len(calls) - 1
            self.say(verdict.message + ("" if last else "; trying the next"))
            self.compensate(group, call, verdict, self.say)
            shortfalls.append(verdict.shortfall or verdict.message)
        raise CapacityError(f"{group.exhausted}: " + "; ".join(shortfalls))
