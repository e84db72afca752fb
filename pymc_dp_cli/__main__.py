"""``python -m pymc_dp_cli`` runs the ``pymc-dp`` command line."""

import sys

from pymc_dp_cli import main

sys.exit(main())
