"""Spark Structured Streaming pipelines and the driver program that runs them.

Nothing here is imported by the harness process except `config`: the pipelines run
in their own driver process (`python -m workloads.pipelines.driver CONFIG.json`).
"""
