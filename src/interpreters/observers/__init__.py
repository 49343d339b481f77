"""Observers: what watches a run from outside and can change nothing (`observe`),
logging (`logs`) and OpenTelemetry (`otel`, the `otel` extra)."""
