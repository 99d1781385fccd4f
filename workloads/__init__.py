"""Workloads: event generators, rate shapes, pipelines and scenarios."""
