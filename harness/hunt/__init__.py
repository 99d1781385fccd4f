"""`python -m harness hunt`: a seeded fault search that shrinks what it finds.

  plan.py     draw a fault plan from the seed: kinds, times, targets and keys, among the
              registered kinds whose preconditions the case meets
  shrink.py   delta debugging over a failing plan: fewer faults, earlier or shorter ones, a
              shorter workload, while it still fails
  search.py   the runs: each plan a checked case on services started once; hunt.json
  tomlw.py    minimal.toml: a complete scenario with the smallest plan
"""
