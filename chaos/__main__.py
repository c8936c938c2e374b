"""``python -m chaos``: see chaos/README.md."""

import sys

from .cli import main

sys.exit(main())
