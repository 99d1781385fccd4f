import sys

from workloads.cli import main

sys.exit(main())
