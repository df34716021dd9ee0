"""Unit tests of the device agent (accelpool_agent): fake, CPU and scripted-NVML backends."""
