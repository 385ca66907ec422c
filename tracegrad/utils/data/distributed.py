"""torch.utils.data.distributed.DistributedSampler: each rank's share of a dataset."""
import math

import numpy as np

from .sampler import Sampler
from ... import distributed as dist

__all__ = ["DistributedSampler"]


def torch_randperm(n, seed):
    """torch.randperm(n, generator=torch.Generator().manual_seed(seed)).tolist(): the same
    permutation as torch's CPU generator (mt19937 seeded with the seed's low 32 bits, one
    32-bit draw per Fisher-Yates swap), so every rank (and a torch program) agrees on the
    order."""
    perm = list(range(n))
    if n > 1:
        draws = np.random.RandomState(seed & 0xFFFFFFFF).randint(0, 2 ** 32, size=n - 1, dtype=np.uint32).tolist()
        for i in range(n - 1):
            j = i + draws[i] % (n - i)
            perm[i], perm[j] = perm[j], perm[i]
    return perm


class DistributedSampler(Sampler):
    """Indices of the dataset for one of `num_replicas` ranks: a permutation shared by all
    ranks (seeded by seed + epoch), padded by repeating its start (or cut, drop_last) to a
    multiple of num_replicas, every num_replicas-th index from `rank` on. The order is
    torch's, index for index."""

    def __init__(self, dataset, num_replicas=None, rank=None, shuffle=True, seed=0, drop_last=False):
        if num_replicas is None or rank is None:
            if not dist.is_initialized():
                raise RuntimeError("DistributedSampler: pass num_replicas and rank, or call "
                                   "tracegrad.distributed.init_process_group first")
            num_replicas = dist.get_world_size() if num_replicas is None else num_replicas
            rank = dist.get_rank() if rank is None else rank
        if rank >= num_replicas or rank < 0:
            raise ValueError(f"Invalid rank {rank}, rank should be in the interval [0, {num_replicas - 1}]")
        self.dataset = dataset
        self.num_replicas = num_replicas
        self.rank = rank
        self.epoch = 0
        self.drop_last = drop_last
        if self.drop_last and len(self.dataset) % self.num_replicas != 0:
            self.num_samples = math.ceil((len(self.dataset) - self.num_replicas) / self.num_replicas)
        else:
            self.num_samples = math.ceil(len(self.dataset) / self.num_replicas)
        self.total_size = self.num_samples * self.num_replicas
        self.shuffle = shuffle
        self.seed = seed

    def __iter__(self):
        n = len(self.dataset)
        indices = torch_randperm(n, self.seed + self.epoch) if self.shuffle else list(range(n))
        if not self.drop_last:
            padding_size = self.total_size - len(indices)
            if padding_size <= len(indices):
                indices += indices[:padding_size]
            else:
                indices += (indices * math.ceil(padding_size / len(indices)))[:padding_size]
        else:
            indices = indices[:self.total_size]
        return iter(indices[self.rank:self.total_size:self.num_replicas])

    def __len__(self):
        return self.num_samples

    def set_epoch(self, epoch):
        """The epoch, which seeds the shuffle: call it before each epoch's iteration."""
        self.epoch = epoch
