"""``python -m numalign.cli`` is the ``numalign`` command."""

import sys

from numalign.cli.main import main

sys.exit(main())
