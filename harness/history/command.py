"""`python -m harness history add|check|report`: what each prints and its exit code
(docs/results.md, "Nightly history").

- `add STORE RUN_DIR...`: all or nothing (a run that cannot be read adds none of them: exit 2);
  a run already there is left as it was, with a note (exit 0), so a retried night completes;
- `check STORE [--json FILE]`: 1 an alarm, 4 a night that cannot be judged, 0 neither, 2 no
  store or no runs in it;
- `report STORE [--out trend.html]`: the trend page.
"""

from __future__ import annotations

from harness.history import check, trend
from harness.history.store import Store


def main(args) -> int:
    store = Store(args.store)
    if args.history_command == "add":
        for added in store.add(*args.run_dirs, report=args.report_url):
            print(added.text())
        return 0
    if args.history_command == "check":
        checked = check.check(store.require())
        print(check.render(checked))
        if args.json is not None:
            check.write_json(checked, args.json)
        return checked.exit_code
    print(trend.write(store, args.out))
    return 0
