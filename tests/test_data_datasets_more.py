"""utils.data.StackDataset, ChainDataset and IterableDataset + IterableDataset, against torch."""
import pytest
import torch

import tracegrad as tg


def _error(f):
    try:
        f()
    except Exception as e:      # noqa: BLE001 - compared
        return type(e).__name__, str(e)
    return None


def plain(x):
    if isinstance(x, (torch.Tensor, tg.Tensor)):
        return ("T", x.tolist())
    if isinstance(x, dict):
        return {k: plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return type(x).__name__, [plain(v) for v in x]
    return x


def its(L):
    class It(L.utils.data.IterableDataset):
        def __init__(self, n):
            self.n = n

        def __iter__(self):
            return iter(range(self.n))

        def __len__(self):
            return self.n
    return It


CASES = {
    "stack tuple": lambda L: [L.utils.data.StackDataset(L.arange(3), [10, 11, 12])[i] for i in range(3)],
    "stack dict": lambda L: L.utils.data.StackDataset(x=L.arange(2.0), y=["a", "b"])[1],
    "stack len": lambda L: len(L.utils.data.StackDataset(L.arange(4), L.arange(4))),
    "stack getitems": lambda L: L.utils.data.StackDataset(L.utils.data.TensorDataset(L.arange(3)), [5, 6, 7])
    .__getitems__([2, 0]),
    "stack loader": lambda L: list(L.utils.data.DataLoader(L.utils.data.StackDataset(a=L.arange(4.0), b=L.arange(4)),
                                                          batch_size=3)),
    "chain": lambda L: list(L.utils.data.ChainDataset([its(L)(2), its(L)(3)])),
    "chain len": lambda L: len(L.utils.data.ChainDataset([its(L)(2), its(L)(3)])),
    "iterable add": lambda L: (type(its(L)(2) + its(L)(1)).__name__, list(its(L)(2) + its(L)(1))),
    "chain loader": lambda L: list(L.utils.data.DataLoader(L.utils.data.ChainDataset([its(L)(3), its(L)(2)]),
                                                          batch_size=2)),
}


@pytest.mark.parametrize("name", list(CASES))
def test_datasets_match_torch(name):
    assert plain(CASES[name](tg)) == plain(CASES[name](torch))


ERRORS = {
    "stack both": lambda L: L.utils.data.StackDataset(L.arange(2), y=L.arange(2)),
    "stack none": lambda L: L.utils.data.StackDataset(),
    "stack sizes": lambda L: L.utils.data.StackDataset(L.arange(2), L.arange(3)),
    "chain of a map dataset": lambda L: list(L.utils.data.ChainDataset([its(L)(1), [1]])),
    "chain len of a map dataset": lambda L: len(L.utils.data.ChainDataset([its(L)(1), [1]])),
}


@pytest.mark.parametrize("name", list(ERRORS))
def test_dataset_errors_match_torch(name):
    want, got = _error(lambda: ERRORS[name](torch)), _error(lambda: ERRORS[name](tg))
    assert want is not None and got == want
