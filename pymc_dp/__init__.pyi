# The public names of pymc_dp, for type checkers and for the lazy loader (pymc_dp/__init__.py),
# which reads this file: a name listed here loads its module on first use. (pymc_dp.models, the
# ready-made models, is pymc_dp.model.ready_made, served by pymc_dp/_legacy.py.)
from . import (
    cli as cli,
)
from . import (
    curator as curator,
)
from . import (
    datasets as datasets,
)
from . import (
    engine as engine,
)
from . import (
    evaluation as evaluation,
)
from . import (
    families as families,
)
from . import (
    kernels as kernels,
)
from . import (
    likelihoods as likelihoods,
)
from . import (
    mechanisms as mechanisms,
)
from . import (
    model as model,
)
from . import (
    plots as plots,
)
from . import (
    regression as regression,
)
from . import (
    studies as studies,
)
from .curator.budget import BudgetExceededError as BudgetExceededError
from .curator.budget import PrivacyBudget as PrivacyBudget
from .curator.grouped import release_grouped as release_grouped
from .curator.marginals import MarginalRelease as MarginalRelease
from .curator.marginals import release_marginals as release_marginals
from .curator.record import Release as Release
from .curator.regression.record import RegressionRelease as RegressionRelease
from .curator.regression.release import release_regression as release_regression
from .curator.release_set import ReleaseSet as ReleaseSet
from .curator.single import release as release
from .evaluation.baselines import naive_posterior as naive_posterior
from .evaluation.baselines import nonprivate_posterior as nonprivate_posterior
from .evaluation.measures import calibration_quantiles as calibration_quantiles
from .evaluation.measures import ecdf as ecdf
from .evaluation.measures import interval_coverage as interval_coverage
from .evaluation.measures import ks_band as ks_band
from .evaluation.measures import ks_statistic as ks_statistic
from .evaluation.measures import mmd2_unbiased as mmd2_unbiased
from .model.hierarchical import centring_weights as centring_weights
from .model.latent import sample_latent as sample_latent
from .model.marginals_laplace import marginals_laplace_posterior as marginals_laplace_posterior
from .model.nodes.marginals import NoisyMarginals as NoisyMarginals
from .model.nodes.marginals import marginals_model as marginals_model
from .model.noisy_suffstat import NoisySuffStat as NoisySuffStat
from .model.step_methods import ConjugateStep as ConjugateStep
from .model.step_methods import GridStep as GridStep
from .model.step_methods import GroupJumpStep as GroupJumpStep
from .model.step_methods import IndependenceStep as IndependenceStep
from .model.step_methods import NoiseVarianceStep as NoiseVarianceStep
from .model.step_methods import NormProductStep as NormProductStep
from .model.step_methods import RecordStep as RecordStep
from .model.step_methods import grouped_steps as grouped_steps
from .model.synthetic import combine as combine
from .model.synthetic import synthetic_datasets as synthetic_datasets
from .regression.model.noisy_regression import NoisyRegressionStat as NoisyRegressionStat
from .regression.model.noisy_regression import regression_attrs as regression_attrs
from .regression.model.steps import BinaryCovariateStep as BinaryCovariateStep
from .regression.model.steps import CovariateModelStep as CovariateModelStep
from .regression.model.steps import RegressionConjugateStep as RegressionConjugateStep
from .regression.model.steps import RegressionNoiseVarianceStep as RegressionNoiseVarianceStep
from .regression.model.steps import RegressionSuffStatStep as RegressionSuffStatStep

__version__: str
