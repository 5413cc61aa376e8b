"""``python -m simpact.cli``: the ``simpact`` command."""

import sys

from simpact.cli import main

sys.exit(main())
