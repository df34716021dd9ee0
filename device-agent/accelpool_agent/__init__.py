"""accelpool device agent: per-node GPU telemetry, health and performance checks."""
