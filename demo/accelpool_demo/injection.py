"""What `accelpool demo inject NODE FAULT` accepts, checked before anything is sent. Pure.

A FAULT is one of:
- an agent fault, read by the device agent's own parser (`accelpool_agent.faults`): `xid=79`,
  `ecc-dbe`, `slow-matmul=3`, ... for GPU 0, `N:FAULT` for GPU N, `all:FAULT` for every GPU; the
  demo's kubelet restarts NODE's agent with `--fault` (so a fault the agent would refuse, and a GPU
  the node does not have, are refused here instead of killing the agent);
- `mig-broken`: NODE's simulated MIG manager reports success and creates nothing;
- `no-runtime-class`: the `nvidia` RuntimeClass is deleted, and NODE's agent pod with it;
- `strategy-override=single|mixed|off`: the cluster-wide MIG strategy (NODE is not used: `-`);
- `clear`: NODE's faults removed, and the RuntimeClass back.

Used by `accelpool_demo.command` (argument parsing), `accelpool_demo.run.inject` (which applies
one) and the simulated kubelet (`agent_fault_argument`: the `--fault` value an agent is given).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from accelpool_agent.faults import FaultSpecError, faults_by_gpu, parse_fault_spec, valid_faults

STRATEGY_OVERRIDE = "strategy-override="
STRATEGIES = ("single", "mixed", "off")
ANY_NODE = "-"
"""What to pass as NODE for a fault that concerns the whole cluster."""


class InjectionKind(enum.StrEnum):
    AGENT = "agent"
    MIG_BROKEN = "mig-broken"
    NO_RUNTIME_CLASS = "no-runtime-class"
    STRATEGY_OVERRIDE = "strategy-override"
    CLEAR = "clear"


VALID_FAULTS = f"""valid faults:
  agent faults (NODE's agent restarts with it; GPU 0, or N:FAULT for GPU N, all:FAULT for every GPU):
    {valid_faults()}
  mig-broken                          NODE's MIG manager reports success and creates nothing
  no-runtime-class                    the nvidia RuntimeClass is deleted, and NODE's agent pod
  strategy-override=single|mixed|off  the cluster-wide MIG strategy (NODE unused: pass {ANY_NODE})
  clear                               NODE's faults removed, the RuntimeClass back"""


class InjectionError(ValueError):
    """A FAULT the demo cannot inject; the message says why and lists the valid ones."""


@dataclass(frozen=True)
class Injection:
    """A parsed FAULT. `value` is the agent's `--fault` argument (AGENT) or the strategy (STRATEGY_OVERRIDE)."""

    kind: InjectionKind
    text: str
    value: str = ""

    @property
    def names_a_node(self) -> bool:
        return self.kind is not InjectionKind.STRATEGY_OVERRIDE


def parse_injection(text: str) -> Injection:
    """FAULT as `accelpool demo inject` reads it; `InjectionError` names the problem and the valid faults."""
    fault = text.strip()
    if fault.startswith(STRATEGY_OVERRIDE):
        strategy = fault.removeprefix(STRATEGY_OVERRIDE)
        if strategy not in STRATEGIES:
            raise InjectionError(f"{text!r}: the strategy is single, mixed or off\n{VALID_FAULTS}")
        return Injection(InjectionKind.STRATEGY_OVERRIDE, fault, strategy)
    if fault in (InjectionKind.MIG_BROKEN, InjectionKind.NO_RUNTIME_CLASS, InjectionKind.CLEAR):
        return Injection(InjectionKind(fault), fault)
    argument = agent_fault_argument(fault)
    try:
        parse_fault_spec(argument)
    except FaultSpecError as error:
        reason = str(error).removeprefix(f"invalid --fault {argument!r}: ").split("; valid faults:")[0]
        raise InjectionError(f"invalid fault {text!r}: {reason}\n{VALID_FAULTS}") from None
    return Injection(InjectionKind.AGENT, fault, argument)


def agent_fault_argument(fault: str) -> str:
    """The agent's `--fault` value for an injected agent fault: GPU 0 unless it names its GPUs."""
    return fault if ":" in fault.split("=")[0] else f"0:{fault}"


def check_gpus(injection: Injection, node: str, gpu_count: int) -> None:
    """An agent fault must name GPUs NODE has (the agent refuses any other and exits)."""
    if injection.kind is not InjectionKind.AGENT:
        return
    try:
        faults_by_gpu([parse_fault_spec(injection.value)], gpu_count)
    except FaultSpecError as error:
        reason = str(error).removeprefix(f"invalid --fault {injection.value!r}: ")
        raise InjectionError(f"invalid fault {injection.text!r} for {node} ({gpu_count} GPUs): {reason}") from None
