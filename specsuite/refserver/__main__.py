"""`python -m specsuite.refserver`: run the reference speculative-decoding server."""

import sys

from specsuite.refserver.cli import main

sys.exit(main())
