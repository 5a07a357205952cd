"""Python client of the sandbox's admin endpoint (`POST /_trainctl/admin/<action>`, JSON in and out).

Stdlib only, so tests and demos can flip fault switches without importing boto3 or moto.

    admin = SandboxAdmin("http://127.0.0.1:5123")
    admin.reset()                                        # clean state, seeded again
    admin.set_capacity("g5.12xlarge", "us-east-1a")      # no capacity in that AZ
    admin.set_capacity("g5.12xlarge", "us-east-1a", 2)   # only 2 more instances there
    admin.throttle("RunInstances", 2)                    # the next 2 calls are throttled
    admin.set_latency("*", 50)                           # +50 ms on every call
    admin.set_quota("ec2", "L-DB2E81BA", 256)            # by quota code or quota name
    admin.interrupt("job-1")                             # SageMaker job: Spot interruption; EC2 job: a reclaim
    admin.action("some_extension_action", key="value")   # any action, e.g. SageMaker's
"""
from __future__ import annotations

import json
import urllib.error
import urllib.request


class SandboxAdminError(RuntimeError):
    def __init__(self, action: str, status: int, message: str):
        super().__init__(f"sandbox admin action {action!r} failed ({status}): {message}")
        self.action, self.status, self.message = action, status, message


class SandboxAdmin:
    def __init__(self, endpoint_url: str, timeout: float = 30.0):
        self.endpoint_url = endpoint_url.rstrip("/")
        self.timeout = timeout

    def action(self, name: str, **payload: object) -> dict:
        return self._post(name, payload)

    def _post(self, name: str, payload: dict) -> dict:
        # a dict, not keywords: a payload may hold the key "name" (the SageMaker actions' job name)
        req = urllib.request.Request(f"{self.endpoint_url}/_trainctl/admin/{name}",
                                     data=json.dumps(payload).encode(),
                                     headers={"Content-Type": "application/json"}, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                return json.loads(resp.read())
        except urllib.error.HTTPError as e:
            body = e.read().decode(errors="replace")
            try:
                message = json.loads(body).get("error", body)
            except ValueError:
                message = body
            raise SandboxAdminError(name, e.code, message) from None

    def reset(self, seed: int | None = None) -> dict:
        """Everything back to a freshly seeded sandbox: moto's state, extensions, faults, quotas."""
        return self.action("reset", **({} if seed is None else {"seed": seed}))

    def info(self) -> dict:
        return self.action("info")

    def wait_ready(self, timeout: float = 60.0) -> dict:
        """Block until EC2 (imported in the background at start) is ready."""
        return self.action("wait_ready", timeout=timeout)

    def interrupt(self, job: str, after_seconds: float | None = None, at_step: int | None = None,
                  nodes: int | None = None) -> dict:
        """A Spot interruption of the job `job`: a SageMaker training job now, after some seconds, or at a step;
        otherwise EC2's reclaim of `nodes` (1) Spot instances tagged trainctl:job=`job`: the notice now (or once a
        node logs step `at_step`), the termination `after_seconds` (0) after it. The answer says which
        ("platform")."""
        payload = {"name": job, "after_seconds": after_seconds, "at_step": at_step}
        try:
            done = self._post("interrupt_training_job", {k: v for k, v in payload.items() if v is not None})
            return {"platform": "sagemaker", **done}
        except SandboxAdminError as e:
            if e.status != 404:
                raise
        payload = {"job": job, "after_seconds": after_seconds, "count": nodes, "at_step": at_step}
        done = self._post("reclaim_spot_instances", {k: v for k, v in payload.items() if v is not None})
        return {"platform": "ec2", **done}

    def set_capacity(self, instance_type: str, az: str | None = None, available: bool | int = False) -> dict:
        """available: False = no capacity, True = unlimited again, N = only N more instances (then none)."""
        return self.action("set_capacity", instance_type=instance_type, az=az, available=available)

    def throttle(self, operation: str, times: int) -> dict:
        """Throttle the next `times` calls of `operation` ("RunInstances" or "ec2:RunInstances")."""
        return self.action("throttle", operation=operation, times=times)

    def set_latency(self, operation: str, ms: float) -> dict:
        """Add `ms` to every call of `operation` ("*" = every call); 0 removes it."""
        return self.action("set_latency", operation=operation, ms=ms)

    def set_quota(self, service_code: str, quota: str, value: float, region: str | None = None) -> dict:
        """Set a Service Quotas value (by code or name), in one region or (None) all."""
        return self.action("set_quota", service_code=service_code, quota=quota, value=value, region=region)

    def call_log(self, clear: bool = False) -> list[dict]:
        """The AWS calls trainctl made (User-Agent trainctl/...) since the log was last cleared, with counts."""
        return self.action("call_log", clear=clear)["calls"]

    def calls_in_flight(self) -> int:
        """How many of trainctl's requests the sandbox is answering right now."""
        return self.action("call_log")["in_flight"]

    def clear_faults(self) -> dict:
        return self.action("clear_faults")

    def shutdown(self) -> dict:
        return self.action("shutdown")
