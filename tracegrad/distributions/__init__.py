"""torch.distributions in tracegrad ops: base.py holds Distribution and the first families,
families.py and more_families.py the rest, derived.py the families torch builds by transforming
another, constraints.py the parameter and support sets, kl.py kl_divergence, transforms.py the
transforms, transformed_distribution.py a distribution pushed through them, constraint_registry.py
biject_to and transform_to."""
from . import constraints
from .base import Distribution, Normal, Categorical, Bernoulli, Uniform, MultivariateNormal
from .families import (Exponential, Laplace, LogNormal, Gamma, Beta, Poisson, Geometric, Binomial, Cauchy,
                       StudentT, Chi2, Dirichlet, OneHotCategorical, Multinomial, Independent, HalfNormal)
from .kl import kl_divergence, register_kl
from . import transforms
from .transforms import *  # noqa: F401,F403  (torch.distributions exports every transform)
from .transformed_distribution import TransformedDistribution
from .derived import (Gumbel, Weibull, Pareto, HalfCauchy, RelaxedBernoulli, RelaxedOneHotCategorical,
                      Kumaraswamy, LogisticNormal)
from .more_families import (NegativeBinomial, ContinuousBernoulli, FisherSnedecor, MixtureSameFamily,
                            LowRankMultivariateNormal, VonMises)
from .constraint_registry import biject_to, transform_to

__all__ = ["Distribution", "Normal", "Categorical", "Bernoulli", "Uniform", "MultivariateNormal", "Exponential",
           "Laplace", "LogNormal", "Gamma", "Beta", "Poisson", "Geometric", "Binomial", "Cauchy", "StudentT", "Chi2",
           "Dirichlet", "OneHotCategorical", "Multinomial", "Independent", "HalfNormal", "kl_divergence",
           "register_kl", "constraints", "TransformedDistribution", "biject_to", "transform_to",
           "transforms", "Gumbel", "Weibull", "Pareto", "HalfCauchy", "RelaxedBernoulli",
           "RelaxedOneHotCategorical", "NegativeBinomial", "ContinuousBernoulli",
           "Kumaraswamy", "LogisticNormal", "FisherSnedecor", "MixtureSameFamily",
           "LowRankMultivariateNormal", "VonMises"] + transforms.__all__
