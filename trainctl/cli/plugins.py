"""Commands that other distributions add to trainctl, through the `trainctl.plugins` entry-point group.

The local sandbox AWS is such a plugin: the distribution `trainctl-sandbox` (folder `sandbox/` of the
repository) names a `Plugin` under the entry point `trainctl.plugins:sandbox`; the product wheel holds
none of its code. `trainctl sandbox ...` and the global `--sandbox` reach it through here.

The product knows its plugins by name (`PluginInfo`), so `trainctl --help` lists `sandbox` without
reading any distribution's metadata: scanning the installed distributions for entry points costs
start-up time, so it happens only when the plugin is used. A user without the plugin gets one line
saying what to install (exit 2), from the command and from `--sandbox` alike.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from typer.core import TyperGroup

from trainctl.errors import UsageError

GROUP = "trainctl.plugins"


@dataclass(frozen=True)
class Plugin:
    """What a plugin's entry point names.

    app: a typer.Typer whose commands become `trainctl NAME COMMAND`.
    environment: for the sandbox, the environment that `--sandbox` exports into this process (it starts
        a sandbox when none runs)."""

    app: Any
    environment: Callable[[], dict[str, str]] | None = None


@dataclass(frozen=True)
class PluginInfo:
    """What the product says about a plugin before loading it (help line, how to install it)."""

    name: str
    distribution: str
    help: str
    install: str


SANDBOX = PluginInfo(
    name="sandbox", distribution="trainctl-sandbox",
    help="A local, AWS-shaped sandbox for demos and tests. It is the trainctl-sandbox package.",
    install="`pip install ./sandbox` from a trainctl checkout, or `make install` there")


def load(info: PluginInfo, used_as: str) -> Plugin:
    """The installed plugin, or a one-line UsageError that says how to install it.

    used_as: what the user typed that needs the plugin (`trainctl sandbox`, `--sandbox`)."""
    from importlib.metadata import entry_points  # only here: it scans every installed distribution

    found = entry_points(group=GROUP, name=info.name)
    if not found:
        raise UsageError(f"{used_as} needs the {info.distribution} package, which is not installed; "
                         f"add it with {info.install}")
    entry_point = next(iter(found))
    try:
        plugin = entry_point.load()
    except ImportError as e:  # installed, but broken (a missing dependency, a moved checkout)
        raise UsageError(f"{used_as}: the {info.distribution} package is installed but does not import "
                         f"({e}); reinstall it with {info.install}") from e
    if not isinstance(plugin, Plugin):
        raise UsageError(f"{used_as}: the entry point {GROUP}:{info.name} ({entry_point.value}) is not a "
                         f"trainctl plugin; reinstall {info.distribution} with {info.install}")
    return plugin


class PluginGroup(TyperGroup):
    """A command group whose commands come from a plugin, loaded the first time they are needed.

    Listing the group in `trainctl --help` reads only its help line; `trainctl NAME ...` and
    `trainctl NAME --help` load the plugin (or fail with the install hint)."""

    info: PluginInfo

    def _load_commands(self) -> None:
        if self.commands:
            return
        import typer

        plugin_group = typer.main.get_group(load(self.info, f"`trainctl {self.info.name}`").app)
        self.commands.update(plugin_group.commands)

    def list_commands(self, ctx: Any) -> list[str]:
        self._load_commands()
        return super().list_commands(ctx)

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        self._load_commands()
        return super().get_command(ctx, cmd_name)


class SandboxGroup(PluginGroup):
    info = SANDBOX


def sandbox_environment() -> dict[str, str]:
    """The environment behind the global `--sandbox` (a running sandbox's, or a fresh one's)."""
    plugin = load(SANDBOX, "`trainctl --sandbox`")
    if plugin.environment is None:
        raise UsageError(f"`trainctl --sandbox`: the installed {SANDBOX.distribution} provides no environment; "
                         f"reinstall it with {SANDBOX.install}")
    return plugin.environment()
