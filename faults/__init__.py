"""Fault injectors and their schedules (kill executor, kill driver, pause, ...).

Empty for now: a scenario's `faults` must be empty until the fault issue lands; the
services already expose kill/pause/resume on real processes for it to use.
"""
