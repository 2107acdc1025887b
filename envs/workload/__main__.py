"""``python -m envs.workload PATH [--format F] [--capacity GPUS] [--json]``: the workload inspector."""

import sys

from envs.workload.inspect import main

sys.exit(main())
