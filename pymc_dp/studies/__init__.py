"""Studies of the paper's §4: calibration and utility over grids of (model, n, ε).

:func:`reproduce` regenerates Figures 1a–c and 2 of Bernstein & Sheldon (2018) (also as
``pymc-dp reproduce``); :func:`run_point` scores every method at one grid point. Both build on
the public evaluation API (:mod:`pymc_dp.evaluation.measures`) and the batched engine.
"""

from pymc_dp.studies.calibration import METHODS, MethodScore, PointResult, StudySettings, run_point
from pymc_dp.studies.designs import DESIGNS, Design
from pymc_dp.studies.reproduce import PAPER, QUICK, Check, Grid, Report, reproduce

__all__ = [
    "DESIGNS",
    "METHODS",
    "PAPER",
    "QUICK",
    "Check",
    "Design",
    "Grid",
    "MethodScore",
    "PointResult",
    "Report",
    "StudySettings",
    "reproduce",
    "run_point",
]
