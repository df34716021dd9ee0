"""Tests that need a real NVIDIA GPU and driver (marked `gpu`; skipped elsewhere)."""
