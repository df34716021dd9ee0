"""accelpool: ComputePool operator for GPU and accelerator pools on Kubernetes."""
