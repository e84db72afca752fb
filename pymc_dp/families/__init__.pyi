# The public names of pymc_dp.families, for type checkers and for the lazy loader
# (pymc_dp/families/__init__.py), which reads this file: a name listed here loads its module on
# first use, so that importing the light declarations does not load PyTensor.
from .base import ExponentialFamily as ExponentialFamily
from .binomial import Bernoulli as Bernoulli
from .binomial import Binomial as Binomial
from .categorical import Categorical as Categorical
from .counts import Geometric as Geometric
from .counts import Poisson as Poisson
from .declaration import CommandLine as CommandLine
from .declaration import FamilyDeclaration as FamilyDeclaration
from .declaration import FamilyOption as FamilyOption
from .declaration import PriorSpec as PriorSpec
from .gamma import Exponential as Exponential
from .gamma import Gamma as Gamma
from .normal import LogNormal as LogNormal
from .normal import LogNormalKnownSigma as LogNormalKnownSigma
from .normal import Normal as Normal
from .normal import NormalKnownSigma as NormalKnownSigma
from .registry import declared_families as declared_families
from .registry import family_class as family_class
from .registry import family_declaration as family_declaration
from .registry import family_from_dist as family_from_dist
from .registry import get_family as get_family
from .registry import register_family as register_family
from .registry import unregister_family as unregister_family
from .truncated import TruncatedFamily as TruncatedFamily
