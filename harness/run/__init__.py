"""Orchestration of a run.

  runner.py   run(): the stack, then each case; run_case(): its stages, then its result
  stages.py   the stages of a case: start and warm up the driver, offer the load, drain
  collect.py  after the stages: read the sink, check it, measure, build the CaseResult
  case.py     Case: one case under way, the one argument of every stage
  stack.py    Stack: Kafka and PostgreSQL, shared by the cases
  faults.py   the fault schedule, each fault in a thread of its own
"""
