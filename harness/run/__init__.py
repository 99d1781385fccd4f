"""Orchestration of a run.

  runner.py   run(): the stack, then each case; run_case(): its stages, then its result
  stages.py   the stages of a case: start and warm up the driver, offer the load, drain
  collect.py  after the stages: read the sink, check it, measure, build the CaseResult
  case.py     Case: one case under way, the one argument of every stage
  stack.py    Stack: Kafka and PostgreSQL, shared by the cases
  schedule.py the fault schedule, each fault in a thread of its own; what the workload waits for
  pace.py     the query's pace: batches, the warm-up's end, the batches read past a fault
  references.py  the case's restart floor and, when asked, Spark's ceiling (cases[].references)
"""
