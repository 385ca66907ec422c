"""torch.* functions that were missing (tracegrad/torch_functions.py) against torch: the torch.*
forms of nn.functional's ops (aten's argument order, integer reductions), the in-place function
forms, the *_copy forms, the type predicates, windows, unravel_index, combinations, scalar_tensor,
empty_strided, chain_matmul: values, gradients (float64) and errors."""
import warnings

import numpy as np
import pytest
import torch

import tracegrad as tg

R = np.random.default_rng(0)
X4 = R.uniform(-1, 1, (2, 4, 3, 3))
X3 = R.uniform(-1, 1, (2, 4, 6))
W2 = R.uniform(-1, 1, (3, 4, 2, 2))
W1 = R.uniform(-1, 1, (3, 4, 2))
V = R.uniform(-1, 1, (3, 4))
U = R.uniform(-1, 1, (3, 4))
T01 = (R.uniform(0, 1, (3, 4)) > 0.5).astype(np.float64)
SGN = np.where(R.uniform(-1, 1, (3,)) > 0, 1.0, -1.0)
WB = R.uniform(-1, 1, (2, 4, 4))


def t(L, a, req=True):
    return L.tensor(a, dtype=L.float64, requires_grad=req)


CASES = {
    "conv1d": lambda L: L.conv1d(t(L, X3), t(L, W1), None, 1, 1),
    "conv2d": lambda L: L.conv2d(t(L, X4), t(L, W2), t(L, [0.1, 0.2, 0.3]), 1, 1, 1, 1),
    "conv_transpose2d": lambda L: L.conv_transpose2d(t(L, X4), t(L, W2.transpose(1, 0, 2, 3))),
    "max_pool2d": lambda L: L.max_pool2d(t(L, X4), 2, 1),
    "max_pool1d": lambda L: L.max_pool1d(t(L, X3), 2),
    "avg_pool1d": lambda L: L.avg_pool1d(t(L, X3), 2),
    "layer_norm": lambda L: L.layer_norm(t(L, X3), (6,), t(L, np.linspace(0.5, 1.5, 6)), None, 1e-5, True),
    "group_norm": lambda L: L.group_norm(t(L, X3), 2, None, None, 1e-5, True),
    "batch_norm": lambda L: L.batch_norm(t(L, X3), t(L, [1.0, 2.0, 0.5, 1.0]), None, None, None, True, 0.1, 1e-5,
                                         True),
    "instance_norm": lambda L: L.instance_norm(t(L, X3), None, None, None, None, True, 0.1, 1e-5, True),
    "dropout eval": lambda L: L.dropout(t(L, V), 0.5, False),
    "embedding": lambda L: L.embedding(t(L, V), L.tensor([[0, 2], [1, 1]])),
    "embedding padding_idx": lambda L: L.embedding(t(L, V), L.tensor([[0, 2], [1, 1]]), 1),
    "pixel_shuffle": lambda L: L.pixel_shuffle(t(L, X4), 2),
    "channel_shuffle": lambda L: L.channel_shuffle(t(L, X4), 2),
    "prelu": lambda L: L.prelu(t(L, X4), t(L, [0.25])),
    "selu": lambda L: L.selu(t(L, V)),
    "celu": lambda L: L.celu(t(L, V), 0.5),
    "threshold": lambda L: L.threshold(t(L, V), 0.1, -2.0),
    "cosine_similarity": lambda L: L.cosine_similarity(t(L, V), t(L, U)),
    "pairwise_distance": lambda L: L.pairwise_distance(t(L, V), t(L, U)),
    "kl_div": lambda L: L.kl_div(t(L, V), t(L, np.abs(U)), 2),
    "kl_div none": lambda L: L.kl_div(t(L, V), t(L, U), 0, log_target=True),
    "kl_div other int": lambda L: L.kl_div(t(L, V), t(L, np.abs(U)), 5),
    "bce logits": lambda L: L.binary_cross_entropy_with_logits(t(L, V), t(L, T01, False), None, None, 1),
    "hinge": lambda L: L.hinge_embedding_loss(t(L, V), t(L, np.where(T01 > 0, 1.0, -1.0), False), 1.0, 2),
    "margin ranking": lambda L: L.margin_ranking_loss(t(L, V[0]), t(L, U[0]), t(L, np.ones(4), False), 0.1, 1),
    "cosine embedding": lambda L: L.cosine_embedding_loss(t(L, V), t(L, U), t(L, SGN, False), 0.0, 0),
    "triplet": lambda L: L.triplet_margin_loss(t(L, V), t(L, U), t(L, U[::-1].copy()), 1.0, 2, 1e-6, False, 1),
    "poisson nll": lambda L: L.poisson_nll_loss(t(L, V), t(L, np.abs(U)), True, False, 1e-8, 1),
    "rms_norm": lambda L: L.rms_norm(t(L, X3), (6,)),
    "bilinear": lambda L: L.bilinear(t(L, V), t(L, U), t(L, WB), None),
    "expand_copy": lambda L: L.expand_copy(t(L, V[:1]), (2, 3, 4)),
    "permute_copy": lambda L: L.permute_copy(t(L, X3), (2, 0, 1)),
    "transpose_copy": lambda L: L.transpose_copy(t(L, V), 0, 1),
    "t_copy": lambda L: L.t_copy(t(L, V)),
    "view_copy": lambda L: L.view_copy(t(L, V), (2, 6)),
    "select_copy": lambda L: L.select_copy(t(L, V), 1, 2),
    "slice_copy": lambda L: L.slice_copy(t(L, V), 1, 1, 3),
    "diagonal_copy": lambda L: L.diagonal_copy(t(L, V)),
    "squeeze_copy": lambda L: L.squeeze_copy(t(L, V[None])),
    "unsqueeze_copy": lambda L: L.unsqueeze_copy(t(L, V), 1),
    "split_copy": lambda L: L.split_copy(t(L, V), 2),
    "unbind_copy": lambda L: L.unbind_copy(t(L, V)),
    "unsafe_chunk": lambda L: L.unsafe_chunk(t(L, V), 2, 1),
    "unsafe_split": lambda L: t(L, V).unsafe_split(1),
    "combinations": lambda L: L.combinations(t(L, V[0]), 2),
    "combinations repl": lambda L: L.combinations(t(L, V[0, :3]), 3, with_replacement=True),
    "chain_matmul": lambda L: L.chain_matmul(t(L, V), t(L, U.T), t(L, V)),
}


def _flat(x):
    return list(x) if isinstance(x, (tuple, list)) else [x]


@pytest.mark.parametrize("name", list(CASES))
def test_torch_forms_match_torch(name):
    res = {}
    for L in (torch, tg):
        L.manual_seed(0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            outs = _flat(CASES[name](L))
        total = sum((o * o.detach().cos()).sum() for o in outs if o.requires_grad)
        res[L] = [o.detach().numpy() for o in outs]
        if not isinstance(total, int):
            total.backward()
    for g, w in zip(res[tg], res[torch]):
        assert g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12)


def test_gradients_of_the_torch_forms_match_torch():
    for name in ("conv2d", "layer_norm", "kl_div", "cosine embedding", "triplet", "bilinear", "expand_copy",
                 "slice_copy", "split_copy", "combinations", "chain_matmul", "embedding padding_idx", "batch_norm"):
        grads = {}
        for L in (torch, tg):
            made = []
            real = L.tensor

            def tracking(*a, **k):
                x = real(*a, **k)
                if x.requires_grad:
                    made.append(x)
                return x
            L.tensor = tracking
            try:
                outs = _flat(CASES[name](L))
            finally:
                L.tensor = real
            sum((o * o.detach().cos()).sum() for o in outs).backward()
            grads[L] = [None if x.grad is None else x.grad.numpy() for x in made]
        assert len(grads[tg]) == len(grads[torch]), name
        for g, w in zip(grads[tg], grads[torch]):
            assert (g is None) == (w is None), name
            if w is not None:
                np.testing.assert_allclose(g, w, rtol=1e-9, atol=1e-11, err_msg=name)


def test_in_place_function_forms_match_torch():
    for name, args in (("relu_", ()), ("sigmoid_", ()), ("tanh_", ()), ("exp_", ()), ("abs_", ()), ("neg_", ()),
                       ("clamp_", (-0.2, 0.3)), ("fill_", (2.5,)), ("zero_", ()), ("square_", ()), ("sin_", ()),
                       ("floor_", ()), ("reciprocal_", ()), ("nan_to_num_", ())):
        res = []
        for L in (torch, tg):
            x = t(L, V, False)
            y = getattr(L, name)(x, *args)
            res.append((y is x, x.numpy().copy(), x._version))
        assert res[1][0] == res[0][0] and res[1][2] == res[0][2], name
        np.testing.assert_allclose(res[1][1], res[0][1], rtol=1e-13, err_msg=name)


def test_predicates_and_constructors_match_torch():
    def run(L):
        x = L.ones(2, 3)
        out = [L.is_complex(x), L.is_signed(L.ones(1, dtype=L.int64)), L.is_signed(L.ones(1, dtype=L.bool)),
               L.is_nonzero(L.tensor([2.0])), L.is_same_size(x, L.zeros(2, 3)), L.is_same_size(x, L.zeros(3, 2)),
               L.typename(x), L.typename(L.ones(1, dtype=L.int64)), L.typename(3), L.typename("a"),
               str(L.scalar_tensor(3).dtype), L.scalar_tensor(3).item(), str(L.scalar_tensor(2, dtype=L.int64).dtype),
               tuple(L.empty_strided((2, 3), (1, 2)).stride()), tuple(L.empty_strided((2, 3), (1, 2)).shape),
               [c.tolist() for c in L.unravel_index(L.tensor([4, 5, -1, 6, -7]), (2, 3))],
               [c.tolist() for c in L.unravel_index(L.tensor(4), (2, 3))],
               tuple(L.combinations(L.tensor([1.0, 2.0]), 3).shape)]
        for n in ("hann_window", "hamming_window", "blackman_window", "bartlett_window", "kaiser_window"):
            for kw in ({}, {"periodic": False}):
                for length in (0, 1, 2, 7):
                    out.append(np.round(getattr(L, n)(length, **kw).numpy(), 6).tolist())
        out.append(np.round(L.kaiser_window(6, False, 5.0, dtype=L.float64).numpy(), 12).tolist())
        out.append(np.round(L.hamming_window(6, True, 0.5, 0.5, dtype=L.float64).numpy(), 12).tolist())
        return out
    assert run(tg) == run(torch)


def _error(f):
    try:
        f()
    except Exception as e:      # noqa: BLE001 - compared
        return type(e).__name__, str(e)
    return None


@pytest.mark.parametrize("case", range(7))
def test_errors_match_torch(case):
    def call(L):
        return [lambda: L.is_nonzero(L.ones(2)),
                lambda: L.unravel_index(L.tensor([2]), (2, -3)),
                lambda: L.unravel_index(L.tensor([1.0]), (2, 3)),
                lambda: L.combinations(L.ones(2, 2)),
                lambda: L.hann_window(3, dtype=L.int64),
                lambda: L.hann_window(-1),
                lambda: L.kl_div(L.ones(2), L.ones(3), 5),
                ][case]()
    want, got = _error(lambda: call(torch)), _error(lambda: call(tg))
    assert want is not None and got is not None and got[0] == want[0], (got, want)
