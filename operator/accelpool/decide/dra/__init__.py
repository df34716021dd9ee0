"""DRA pools: NVIDIA's DRA driver's ResourceSlices read, DeviceClasses and per-GPU DeviceTaintRules decided. Pure."""
