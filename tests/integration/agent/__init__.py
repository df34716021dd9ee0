"""The device agent's node reporter against the emulated API server (accelpool_demo.apiserver)."""
