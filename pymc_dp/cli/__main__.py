"""``python -m pymc_dp.cli`` runs the ``pymc-dp`` command line."""

import sys

from pymc_dp.cli import main

sys.exit(main())
