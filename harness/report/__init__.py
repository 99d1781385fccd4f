"""What a run leaves for people: summary.json (the contract) and the terminal table.

  summary.py   build, validate, write and load summary.json (schema/summary.schema.json)
  table.py     the terminal table, one row per case
"""
