"""`python -m accelpool_agent` runs the `accelpool-agent` command."""

import sys

from accelpool_agent.cli import main

if __name__ == "__main__":  # compute children (spawn) re-import this module as __mp_main__
    sys.exit(main())
