"""The device agent's node reporter against the kmock Kubernetes emulator."""
