"""The nightly history: every run kept, each case's figures and correctness as series over the
nights, the changes in them found, and a trend page (docs/results.md, "Nightly history").

- `store.py`: the store, a directory of one JSON file per run (`history add`), and its series;
- `noise.py`: each figure's noise on the machine, from runs of the same commit (A/A);
- `changes.py`: change points in the speed figures (the method chosen by measurement:
  benchmarks/changepoints.py), and in correctness, where one flip is a change;
- `check.py`: `history check`, what it prints and its exit code;
- `trend.py`: `history report`, the self-contained trend.html.
"""
