"""``python -m softwalltime`` is the ``softwalltime`` command."""

import sys

from .cli import main

sys.exit(main())
