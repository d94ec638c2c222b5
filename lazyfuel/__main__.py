"""`python -m lazyfuel` runs the command line."""

import sys

from lazyfuel.cli import main

sys.exit(main())
