"""What a run leaves for people, from its result (harness/results/).

  table.py     the terminal table, one row per case
  html.py      report.html, with svg.py's charts
  compare.py   python -m harness compare: two runs against the noise
  unlike.py    the runs compare loads, and those it refuses (another workload, another machine)
  judge.py     Welch's t-test, one run against a measured noise, the judged figure's name
"""
