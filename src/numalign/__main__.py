"""``python -m numalign``: the ``numalign`` command."""

import sys

from numalign.cli import main

sys.exit(main())
