"""Arms of an A/B run: which servers `specsuite run` compares and how each is reached.

An arm is either a running server (`--server-url`, `--baseline-url`) or a launch command
(`--arm NAME=CMD`), which the pytest session starts and stops, so every repeat of a launched arm
runs on a freshly started server.  With no server options the arms are the reference server's
nofix and fix builds (the recycled-draft_probs bug unfixed and fixed); `--reference-sampler nofix=sglang==0.5.20,...`
gives each of them the reference server's `--sampler` (which chain sampler decides).  The arms of
a run may run side by side (specsuite.orchestration.runner), so each default arm gets its own port.
"""

from __future__ import annotations

import re
import shlex
import socket
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import dataclass

from specsuite.errors import SpecsuiteError
from specsuite.server import refserver_contract

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
DEFAULT_REFERENCE_ARMS = refserver_contract.ARMS


@dataclass(frozen=True)
class ArmSpec:
    """One arm: a name, and either a URL to reach or a command to launch (with its URL).

    `reference_args` is set on the embedded reference server's arms only: (arm, extra flags), from
    which `on_port` builds the same server on another port, so one arm can run as several
    sessions at once, each on a server of its own (specsuite.orchestration.runner's parts).
    """

    name: str
    url: str | None = None
    launch: str | None = None
    reference_args: tuple[str, tuple[str, ...]] | None = None
    env: tuple[tuple[str, str], ...] = ()  # the arm's own environment (its session's, so its launched server's too)

    def on_port(self, port: int) -> ArmSpec:
        """This reference arm launched on `port`; any other arm cannot be duplicated and raises."""
        if self.reference_args is None:
            raise SpecsuiteError(f"arm {self.name} is not the embedded reference server; it cannot be started on another port")
        return reference_arm(self.reference_args[0], port, self.reference_args[1])


def reference_arm(arm: str, port: int, extra_args: tuple[str, ...] = ()) -> ArmSpec:
    """The embedded reference server as an arm (the bug's speculative configuration)."""
    command = refserver_contract.server_command(arm, port=port, extra_args=extra_args)
    return ArmSpec(arm, launch=shlex.join(command), reference_args=(arm, tuple(extra_args)))


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """`count` distinct TCP ports free right now: every probe socket stays bound until all are picked,
    so two arms started side by side never get the same one (another process could still take one)."""
    with ExitStack() as stack:
        ports = []
        for _ in range(count):
            probe = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            probe.bind((host, 0))
            ports.append(int(probe.getsockname()[1]))
    return ports


def parse_arm(text: str) -> ArmSpec:
    """`NAME=LAUNCH_CMD` from the command line; leading `VAR=value` words of the command (as a shell takes them, e.g.
    `CUDA_VISIBLE_DEVICES=1 python -m sglang.launch_server ...`) become the arm's environment."""
    name, sep, command = text.partition("=")
    if not sep or not command.strip():
        raise SpecsuiteError(f"--arm expects NAME=LAUNCH_CMD, got {text!r}")
    if not _NAME.match(name):
        raise SpecsuiteError(f"arm name {name!r} must be letters, digits, '.', '_' or '-'")
    try:
        words = shlex.split(command)
    except ValueError as exc:
        raise SpecsuiteError(f"--arm {name}: cannot split its command: {exc}") from None
    env = []
    while words and _ASSIGNMENT.match(words[0]):
        variable, _, value = words.pop(0).partition("=")
        env.append((variable, value))
    if not words:
        raise SpecsuiteError(f"--arm {name}: no command after its variables, got {command.strip()!r}")
    return ArmSpec(name, launch=shlex.join(words) if env else command.strip(), env=tuple(env))


def parse_reference_samplers(text: str) -> dict[str, str]:
    """`nofix=sglang==0.5.20,fix=sglang==0.5.23`: the `--sampler` of each default reference arm."""
    from specsuite.kernels.loader import KernelSpec

    samplers: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        arm, sep, sampler = item.partition("=")
        if not sep or not sampler.strip():
            raise SpecsuiteError(f"--reference-sampler expects ARM=SAMPLER[,ARM=SAMPLER], got {item!r}")
        if arm not in DEFAULT_REFERENCE_ARMS:
            raise SpecsuiteError(f"--reference-sampler: {arm!r} is not a default reference arm ({', '.join(DEFAULT_REFERENCE_ARMS)})")
        sampler = sampler.strip()
        if sampler != "numpy":
            try:
                spec = KernelSpec.parse(sampler)
            except SpecsuiteError as exc:
                raise SpecsuiteError(f"--reference-sampler {arm}={sampler}: {str(exc).partition(': ')[2]}") from None
            if spec.kind == "refserver":
                raise SpecsuiteError(f"--reference-sampler {arm}={sampler}: the reference server's own sampler is 'numpy'")
        samplers[arm] = sampler
    return samplers


def resolve_arms(server_url: str | None, baseline_url: str | None, arm_texts: list[str], reference_port: int | Sequence[int],
                 reference_samplers: str | None = None) -> list[ArmSpec]:
    """The arms in run order; the last one is the baseline the others are compared against.

    `reference_port` places the default reference arms: one port per arm in their order, or a
    single base port (arm i then serves on base + i).
    """
    arms: list[ArmSpec] = []
    if server_url:
        arms.append(ArmSpec("candidate", url=server_url))
    arms += [parse_arm(text) for text in arm_texts]
    if baseline_url:
        arms.append(ArmSpec("baseline", url=baseline_url))
    samplers = parse_reference_samplers(reference_samplers) if reference_samplers else {}
    if samplers and arms:
        raise SpecsuiteError("--reference-sampler applies only with the default reference arms (no --server-url, --baseline-url or --arm)")
    if not arms:
        ports = ([reference_port + i for i in range(len(DEFAULT_REFERENCE_ARMS))] if isinstance(reference_port, int)
                 else list(reference_port))
        if len(ports) != len(DEFAULT_REFERENCE_ARMS) or len(set(ports)) != len(ports):
            raise SpecsuiteError(f"the default reference arms need {len(DEFAULT_REFERENCE_ARMS)} distinct ports, got {ports}")
        arms = [reference_arm(arm, port, ("--sampler", samplers[arm]) if arm in samplers else ())
                for arm, port in zip(DEFAULT_REFERENCE_ARMS, ports, strict=True)]
    names = [arm.name for arm in arms]
    if len(set(names)) != len(names):
        raise SpecsuiteError(f"arm names must be unique, got {', '.join(names)}")
    return arms
