"""The accelerator catalog: the single source for every hardware fact accelpool uses.

Names and aliases, vendor, memory, form factor, dense peak TFLOPS per dtype, memory bandwidth,
board power, the Kubernetes resource name, how a node advertises the device (GFD, GKE,
Karpenter, AMD node labeller, instance types) and, for MIG-capable GPUs, the profile table.

Modules: `model` (the types), `data` (the entries: declarative), `index` (lookups by name, alias, model).

Pure data and pure lookups: the API models, the planner, node detection, the renderers, the
agent's fake backend and `accelpool catalog` all read from here. Each value carries its source:

- [hw]   shared reference "hardware.md" (NVIDIA datasheets, dense = half the sparse figure;
         stas00/ml-engineering; AMD MI300X product page).
- [mig]  shared reference "mig-and-labels.md" (NVIDIA MIG user guide; NVIDIA/mig-parted
         `pkg/mig/builder/builder_test.go`).
- [lbl]  shared reference "mig-and-labels.md" node-label table and "nvidia.md" GFD table.
- [vendor] the vendor's product page, not in the shared reference; marked so it can be re-checked.
- [mamf] dense peak implied by a measured MAMF row of hardware.md (achieved / fraction of peak).
- [cc]   compute capability from NVIDIA's "CUDA GPUs" page (developer.nvidia.com/cuda-gpus).
- [parted] NVIDIA's default mig-parted config (NVIDIA/mig-parted `deployments/systemd/config-default.yaml`,
         the same table as NVIDIA/gpu-operator `assets/state-mig-manager/0400_configmap.yaml`): the
         profiles NVIDIA itself configures per GPU. Where it disagrees with the shared reference, it wins.
"""

from accelpool_core.catalog.data import (
    ACCELERATORS,
    AMD_GPU,
    AWS_NEURON,
    GOOGLE_TPU,
    NVIDIA_GPU,
)
from accelpool_core.catalog.index import BY_NAME, UnknownAcceleratorError, find, lookup, suggest, variants
from accelpool_core.catalog.model import (
    Accelerator,
    Detection,
    Dtype,
    FormFactor,
    MigProfile,
    Peaks,
    Vendor,
    mig_name,
    mig_resource,
)

__all__ = [
    "ACCELERATORS",
    "AMD_GPU",
    "AWS_NEURON",
    "BY_NAME",
    "GOOGLE_TPU",
    "NVIDIA_GPU",
    "Accelerator",
    "Detection",
    "Dtype",
    "FormFactor",
    "MigProfile",
    "Peaks",
    "UnknownAcceleratorError",
    "Vendor",
    "find",
    "lookup",
    "mig_name",
    "mig_resource",
    "suggest",
    "variants",
]
