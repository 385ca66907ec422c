"""torch.utils.data: datasets, samplers, and the DataLoader that batches them."""
from .dataset import (Dataset, IterableDataset, TensorDataset, ConcatDataset, Subset, random_split, StackDataset,
                      ChainDataset)
from .sampler import (Sampler, SequentialSampler, RandomSampler, SubsetRandomSampler, WeightedRandomSampler,
                      BatchSampler)
from .dataloader import DataLoader, default_collate, default_convert, get_worker_info
from .distributed import DistributedSampler
from . import distributed  # noqa: F401

__all__ = ["Dataset", "IterableDataset", "TensorDataset", "ConcatDataset", "Subset", "random_split", "StackDataset",
           "ChainDataset", "Sampler",
           "SequentialSampler", "RandomSampler", "SubsetRandomSampler", "WeightedRandomSampler", "BatchSampler",
           "DataLoader", "default_collate", "default_convert", "get_worker_info", "DistributedSampler"]
