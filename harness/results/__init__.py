"""The result of a run and where it lives.

  model.py     RunResult, CaseResult, FaultRecord, Incident, Finding: typed, one accessor per
               headline figure (throughput, p99, recovery)
  verdict.py   the verdict rules
  summary.py   summary.json: validate, write, load (every version in READS)
  rundir.py    RunDir and CaseDir: every file of a run directory, named once
  schema/      the JSON schemas, current and older; CHANGELOG.md their history
"""
