"""Unit tests of the Python API (accelpool_sdk)."""
