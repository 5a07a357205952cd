"""The backend's class: what it declares (platform, title, capabilities, options, what its jobs run on) and each
method of the contract (backends/base.py) as one line calling the module of this folder that implements it.

Derive from the capability types of backends/features.py that the platform has (RecoversLostNodes, OneTypePerJob,
ChoosesDistribution, NodesPublishBudget); `submit` is final in the base class: never override it."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from trainctl.backends.base import Backend, Capabilities, JobView, LaunchRequest, LaunchSettings, LogLine, RunningJob
from trainctl.backends.template import cleanup as _cleanup
from trainctl.backends.template import listing, preflight, status, stopping
from trainctl.backends.template.prepare import prepare


@dataclass(frozen=True)
class TemplateOptions:
    """Stands in for the platform's options: declare them in backends/options.py (OPTIONS) instead."""


class TemplateBackend(Backend):
    platform = "template"                 # the name plans, flags and records use: `name` of its platform.toml
    title = "Template"                    # the name messages use
    # capacity_at_submit: True when a successful submit already holds the instances; recover: True only with
    # features.RecoversLostNodes
    capabilities = Capabilities(capacity_at_submit=False, recover=False)
    options_type = TemplateOptions
    tagged_resource_type = "service:resource-type"   # as the Resource Groups Tagging API writes it
    preflight_names = ()                  # doctor's checks of this platform that need credentials

    def prepare(self, option, spec: Any, settings: LaunchSettings) -> LaunchRequest:
        return prepare(self.client_for, option, spec, settings)

    def describe(self, job_id: str, region: str) -> JobView:
        return status.describe(self.client_for, job_id, region)

    def logs(self, job_id: str, region: str, cursor: dict | None) -> tuple[list[LogLine], dict]:
        return status.logs(self.client_for, job_id, region, cursor)

    def stop(self, job_id: str, region: str, grace_s: float | None = None,
             say: Callable[[str], None] | None = None) -> dict:
        return stopping.stop(self.client_for, job_id, region, grace_s, say)

    def cleanup(self, job_id: str, region: str) -> list[str]:
        return _cleanup.cleanup(self.client_for, job_id, region)

    def running_jobs(self, region: str) -> list[RunningJob]:
        return listing.running_jobs(self.client_for, region)

    @classmethod
    def model_output(cls, bucket: str, job_id: str) -> str:
        return listing.model_output(bucket, job_id)

    def preflight_checks(self, ctx) -> list:
        return preflight.preflight_checks(self.client_for, ctx)
