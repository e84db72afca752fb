"""``python -m pymc_dp`` runs the ``pymc-dp`` command line."""

import sys

from pymc_dp.cli import main

sys.exit(main())
