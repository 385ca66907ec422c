"""torch.distributions in tracegrad ops: base.py holds Distribution and the first families,
families.py the rest, constraints.py the parameter and support sets, kl.py kl_divergence."""
from . import constraints
from .base import Distribution, Normal, Categorical, Bernoulli, Uniform, MultivariateNormal
from .families import (Exponential, Laplace, LogNormal, Gamma, Beta, Poisson, Geometric, Binomial, Cauchy,
                       StudentT, Chi2, Dirichlet, OneHotCategorical, Multinomial, Independent, HalfNormal)
from .kl import kl_divergence, register_kl

__all__ = ["Distribution", "Normal", "Categorical", "Bernoulli", "Uniform", "MultivariateNormal", "Exponential",
           "Laplace", "LogNormal", "Gamma", "Beta", "Poisson", "Geometric", "Binomial", "Cauchy", "StudentT", "Chi2",
           "Dirichlet", "OneHotCategorical", "Multinomial", "Independent", "HalfNormal", "kl_divergence",
           "register_kl", "constraints"]
