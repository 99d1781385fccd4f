import sys

from workloads.generator.cli import main

sys.exit(main())
