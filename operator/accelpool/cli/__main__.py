"""`python -m accelpool.cli`: the `accelpool` command without its console script."""

import sys

from accelpool.cli import main

sys.exit(main())
