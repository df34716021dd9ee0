"""NVIDIA's node-side components, simulated: what they would write on a node, given what they would see.

One simulation for the demo, the operator's integration tests and the convergence benchmark. The
core is pure (no I/O, no clock of its own: every step takes `now`); `Simulation` keeps the
per-node state between steps; the drivers (`accelpool_demo.simulators.NvidiaComponents`, the
integration tests' conftest, benchmarks/operator_convergence.py) read nodes and ConfigMaps,
call `Simulation.node`, and send the `NodeChanges` it returns.

Modelled, each after NVIDIA's own code (paths inside the public repositories):

- GPU Feature Discovery labels, `gfd_labels` (NVIDIA/k8s-device-plugin `internal/lm/resource.go`,
  `internal/lm/mig-strategy.go`, `internal/lm/strategy.go`): `nvidia.com/gpu.{product,count,
  replicas,sharing-strategy,memory}`; `nvidia.com/mig.strategy` under single and mixed;
  `<model>-MIG-<profile>` (single), `<model>-MIG-INVALID` with count, replicas and memory 0 for
  a layout single cannot serve, `nvidia.com/mig-<profile>.*` per profile (mixed); `+` written `.`.
- The device plugin's advertised resources, `advertise` (`internal/rm/device_map.go`,
  `internal/rm/rm.go`): whole GPUs, MIG devices as `nvidia.com/gpu` (single) or
  `nvidia.com/mig-<profile>` (mixed), times sharing replicas; the errors that stop the plugin
  (an empty MIG-enabled GPU under single, more than one MIG device type under single, MIG and
  non-MIG GPUs under single, MPS on MIG devices, `internal/plugin/mps.go`, and MPS under an
  effective mixed strategy, `cmd/nvidia-device-plugin/main.go`): nothing advertised, the kubelet
  then reports 0. Under mixed an empty MIG-enabled GPU is skipped with a warning and the others
  are served (`internal/rm/device_map.go`).
- The effective strategy, `plugin_config`: env `MIG_STRATEGY` (the GPU Operator sets it from
  ClusterPolicy `spec.mig.strategy`) beats the file's `flags.migStrategy`
  (`api/config/v1/flags.go` `updateFromCLIFlag`).
- The config-manager sidecar, `ConfigManager` (`cmd/config-manager/main.go`): follows the
  `nvidia.com/device-plugin.config` label; an unset label takes `DEFAULT_CONFIG` (the GPU Operator's
  `devicePlugin.config.default`), else the fallback (`empty` in the GPU Operator, `named` = the
  `default` key in the standalone chart: `updateConfigName`); a key missing from the mounted
  ConfigMap makes it exit (crash loop: the plugin keeps the config it runs with; retried at each
  restart); it signals the plugin only when the selected key changes, so an edit of that key's
  content is not loaded until the plugin restarts.
- The kubelet's ConfigMap projection, `Projection`: pods see a ConfigMap's update only after a
  sync delay (up to about a minute in real clusters).
- The MIG manager, `MigManager` (NVIDIA/mig-parted `cmd/nvidia-mig-manager/main.go`,
  `pkg/mig/reconfigure/reconfigure.go`): reacts to changes of `nvidia.com/mig.config`
  (`SyncableMigConfig`: values coalesce, a removed label wakes nothing, but every value its informer
  is handed counts, so a label taken off and put back wakes it to run again); an entry missing from
  the mounted file → `failed`, not retried until the label changes; each device spec of an entry
  applies to the GPUs its `device-filter` (PCI device IDs, `devices.PCI_DEVICE_IDS`) and `devices`
  select; an entry already applied → `success`; otherwise `pending` → (`rebooting`, when a MIG
  mode change needs a reboot) → apply → `success`, restarting the plugin and GFD. A profile the
  GPU does not offer creates nothing and still ends in `success`; a label changed mid-run lets
  the run finish (and write `success` for the old value) before the new value is applied.
- The GPU Operator's `nvidia.com/gpu.deploy.device-plugin` label, `device_plugin_deployed`: anything but
  `true` (the operator fills a missing or empty one with `true`; NVIDIA/gpu-operator
  `controllers/state_manager.go`) keeps the device plugin off the node, which then advertises nothing
  (the kubelet reports 0); GFD and the MIG manager still run.

Not modelled: the other `nvidia.com/gpu.deploy.*` labels (and the MIG manager's pause values), subsystem
IDs in a `device-filter`, per-GPU validation of MIG budgets (accelpool validates layouts before writing them), GFD's
architecture and attribute labels other than memory.

Modules: `devices` (GPUs, the plugin's config, GFD labels, advertised resources), `config_manager`
(the ConfigMap projection and the config-manager sidecar), `mig_manager` (the MIG manager),
`node` (one node's components stepped together, and `Simulation`).
"""

from accelpool_demo.nvidia.config_manager import ConfigManager, Projection, mig_configs
from accelpool_demo.nvidia.devices import (
    NAMED_FALLBACK,
    NVIDIA_GPU,
    NVIDIA_VENDOR_ID,
    PCI_DEVICE_IDS,
    STRATEGIES,
    Advertised,
    Fallback,
    Gpu,
    Installation,
    PluginConfig,
    Replicated,
    SharingStrategy,
    Strategy,
    advertise,
    device_plugin_deployed,
    gfd_labels,
    is_gfd_label,
    plugin_config,
)
from accelpool_demo.nvidia.mig_manager import MigManager, MigStep, apply_entry
from accelpool_demo.nvidia.node import Mounted, NodeChanges, NodeState, Simulation, inventory, node_step

__all__ = [
    "NAMED_FALLBACK",
    "NVIDIA_GPU",
    "NVIDIA_VENDOR_ID",
    "PCI_DEVICE_IDS",
    "STRATEGIES",
    "Advertised",
    "ConfigManager",
    "Fallback",
    "Gpu",
    "Installation",
    "MigManager",
    "MigStep",
    "Mounted",
    "NodeChanges",
    "NodeState",
    "PluginConfig",
    "Projection",
    "Replicated",
    "SharingStrategy",
    "Simulation",
    "Strategy",
    "advertise",
    "apply_entry",
    "device_plugin_deployed",
    "gfd_labels",
    "inventory",
    "is_gfd_label",
    "mig_configs",
    "node_step",
    "plugin_config",
]
