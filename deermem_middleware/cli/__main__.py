"""``python -m deermem_middleware.cli``: the ``deermem`` command."""

import sys

from deermem_middleware.cli import main

sys.exit(main())
