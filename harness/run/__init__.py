"""Orchestration of a run.

  runner.py   run(): the stack, then each case (generator -> pipeline -> sink -> checker)
  case.py     Case: one case under way, the one argument of every stage
  stack.py    Stack: Kafka and PostgreSQL, shared by the cases
  rundir.py   the self-describing run directory
"""
