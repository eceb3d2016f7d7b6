"""`python -m refserver`: run the reference speculative-decoding server."""

import sys

from refserver.cli import main

sys.exit(main())
