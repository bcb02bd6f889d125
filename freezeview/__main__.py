"""``python -m freezeview``: the same as the ``freezeview`` console script."""

import sys

from .cli import main

sys.exit(main())
