"""The nightly history: every run kept, each case's figures and correctness as series over the
nights, the changes in them found, and a trend page (docs/results.md, "Nightly history").

- `store.py`: the store, a directory of one JSON file per run (`history add`), and its series:
  each case on each machine (harness/results/machine.py), and on every machine;
- `noise.py`: each figure's noise in a series, from A/A nights and night-to-night differences;
- `levels.py`: where a new level starts (PELT, placed at the first night at the new level);
- `changes.py`: the change points in speed, and when one alarms;
- `correctness.py`: FAIL and UNKNOWN nights, and flips from the night before;
- `check.py`: `history check`, what it prints and its exit code;
- `trend.py`: `history report`, the self-contained trend.html;
- `command.py`: the `history` commands.
"""
