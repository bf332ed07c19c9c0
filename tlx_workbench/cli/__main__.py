"""``python -m tlx_workbench.cli``: the ``tlx-workbench`` command."""
import sys

from . import main

sys.exit(main())
