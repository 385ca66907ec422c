"""Connectionist temporal classification: the loss and its gradient as two primitives, as torch's
CPU kernels compute them (Graves et al. 2006, in log space).

Each target is extended with blanks between and around its labels (blank, l1, blank, l2, ...,
blank: 2S + 1 states). The forward variable alpha[t, s] is the log-probability of the paths
through state s at time t; at each step a state is reached from itself, from the state before,
and (for a label unlike the label two states back) from the one before that. The loss is minus
the log of the two final states' sum at the sample's last frame. The backward kernel runs beta the
other way and gives torch's gradient, exp(log_probs) - exp(log(sum of alpha beta over the states
of class c) + nll - log_probs): the gradient with respect to logits a log_softmax made
log_probs from (torch's; for a log_probs that sums to one over classes it is the same after
log_softmax's backward). It has no derivative, as torch's."""
import numpy as np

from .primitives import Primitive, PRIMITIVES, FrontEnd, _not_implemented
from . import lowering as T

_HOST = T.Refuse("runs its numpy kernel on the host")


def _extended(targets, target_lengths, blank, n, longest):
    """(states, skip): each sample's extended label sequence (n, 2 * longest + 1) and where a state
    may be reached from two states back (a label unlike the label before it)."""
    states = np.full((n, 2 * longest + 1), blank, np.int64)
    if targets.ndim == 1:                  # the targets concatenated: each sample's run in order
        starts = np.concatenate([[0], np.cumsum(target_lengths)[:-1]]).astype(np.int64)
    for b in range(n):
        k = int(target_lengths[b])
        labels = targets[starts[b]:starts[b] + k] if targets.ndim == 1 else targets[b, :k]
        states[b, 1:2 * k:2] = labels
    skip = np.zeros(states.shape, bool)
    skip[:, 2:] = (states[:, 2:] != blank) & (states[:, 2:] != states[:, :-2])
    return states, skip


def _logsumexp3(a, b, c):
    """log(e^a + e^b + e^c) as torch's kernel: the max taken out (0 where all are -inf)."""
    m = np.maximum(np.maximum(a, b), c)
    m = np.where(m == -np.inf, 0, m)
    with np.errstate(divide="ignore"):
        return np.log(np.exp(a - m) + np.exp(b - m) + np.exp(c - m)) + m


def _shift(x, k, fill):
    out = np.full_like(x, fill)
    out[..., k:] = x[..., :-k] if k else x
    return out


def _ctc_kernel(log_probs, targets, input_lengths, target_lengths, blank=0, longest=0, zero_infinity=False):
    T_, n, _ = log_probs.shape
    states, skip = _extended(targets, target_lengths, blank, n, longest)
    L = states.shape[1]
    dt = log_probs.dtype.type
    rows = np.arange(n)[:, None]
    width = 2 * target_lengths[:, None].astype(np.int64) + 1
    inside = np.arange(L)[None, :] < width
    alpha = np.full((n, T_, L), -np.inf, log_probs.dtype)
    if T_:
        emit = log_probs[0][rows, states]
        alpha[:, 0, 0] = emit[:, 0]
        if L > 1:
            has = target_lengths > 0
            alpha[has, 0, 1] = emit[has, 1]
        alpha[input_lengths == 0, 0] = -np.inf
    neg = dt(-np.inf)
    for t in range(1, T_):
        prev = alpha[:, t - 1]
        lse = _logsumexp3(prev, _shift(prev, 1, neg), np.where(skip, _shift(prev, 2, neg), neg))
        new = lse + log_probs[t][rows, states]
        alpha[:, t] = np.where(inside & (t < input_lengths[:, None]), new, neg)
    nll = np.empty(n, log_probs.dtype)
    for b in range(n):
        t_last = int(input_lengths[b]) - 1
        k = int(target_lengths[b])
        if t_last < 0:
            nll[b] = np.inf if k > 0 else dt(0)
            continue
        a1 = alpha[b, t_last, 2 * k]
        a2 = alpha[b, t_last, 2 * k - 1] if k > 0 else neg
        m = max(a1, a2)
        m = dt(0) if m == -np.inf else m
        with np.errstate(divide="ignore"):
            nll[b] = -(np.log(np.exp(a1 - m) + np.exp(a2 - m)) + m)
    return nll, alpha


def _ctc_backward_kernel(g, log_probs, targets, input_lengths, target_lengths, nll, alpha, blank=0,
                         zero_infinity=False):
    T_, n, C = log_probs.shape
    longest = alpha.shape[2] // 2
    states, skip = _extended(targets, target_lengths, blank, n, longest)
    L = states.shape[1]
    dt = log_probs.dtype.type
    neg = dt(-np.inf)
    rows = np.arange(n)[:, None]
    width = 2 * target_lengths[:, None].astype(np.int64) + 1
    inside = np.arange(L)[None, :] < width
    # beta may step to the state after, and two after where that state may be reached by a skip
    skip_next = np.zeros(states.shape, bool)
    skip_next[:, :-2] = skip[:, 2:]
    beta = np.full((n, T_, L), -np.inf, log_probs.dtype)
    last = input_lengths[:, None].astype(np.int64) - 1
    ends = (np.arange(L)[None, :] == width - 1) | ((np.arange(L)[None, :] == width - 2) & (width > 1))
    for t in range(T_ - 1, -1, -1):
        emit = log_probs[t][rows, states]
        start = np.where(ends, emit, neg)
        if t + 1 < T_:
            nxt = beta[:, t + 1]
            step = _logsumexp3(nxt, _shift(nxt[:, ::-1], 1, neg)[:, ::-1],
                               np.where(skip_next, _shift(nxt[:, ::-1], 2, neg)[:, ::-1], neg)) + emit
        else:
            step = np.full_like(start, neg)
        beta[:, t] = np.where(inside & (t == last), start, np.where(inside & (t < last), step, neg))
    occupancy = np.full((T_, n, C), -np.inf, log_probs.dtype)
    ab = np.transpose(alpha + beta, (1, 0, 2))                       # (T, n, L)
    tt, bb, ss = np.meshgrid(np.arange(T_), np.arange(n), np.arange(L), indexing="ij")
    keep = np.broadcast_to(inside[None], ab.shape)
    np.logaddexp.at(occupancy, (tt[keep], bb[keep], states[bb[keep], ss[keep]]), ab[keep])
    with np.errstate(over="ignore", invalid="ignore"):
        grad = (np.exp(log_probs) - np.exp(occupancy + nll[None, :, None] - log_probs)) * g[None, :, None]
    valid = np.arange(T_)[:, None] < input_lengths[None, :]
    if zero_infinity:
        valid = valid & (nll != np.inf)[None, :]
    return np.where(valid[:, :, None], grad, dt(0)).astype(log_probs.dtype, copy=False)


def _ctc_vjp(gs, outs, log_probs, targets, input_lengths, target_lengths, blank=0, longest=0, zero_infinity=False):
    g = FrontEnd.apply(PRIMITIVES["ctc_loss_backward"],
                       (gs[0], log_probs, targets, input_lengths, target_lengths, outs[0], outs[1]),
                       {"blank": blank, "zero_infinity": zero_infinity})
    return g, None, None, None


Primitive("ctc_loss", "lp tg il tl", _ctc_kernel,
          shape=lambda lp, tg, il, tl, blank=0, longest=0, zero_infinity=False: [
              ((lp.shape[1],), None), ((lp.shape[1], lp.shape[0], 2 * longest + 1), None)],
          dtype=lambda args: (None, args[0]._dtype), multi=True, nondiff_outputs=(1,), vjp=_ctc_vjp,
          saves="lp tg il tl out", grad_fn="CtcLossBackward0", triton=_HOST)
Primitive("ctc_loss_backward", "g lp tg il tl nll alpha", _ctc_backward_kernel,
          shape=lambda g, lp, *a, **k: tuple(lp.shape), dtype=lambda args: (None, args[1]._dtype),
          vjp=_not_implemented("_ctc_loss_backward"), grad_fn="NotImplemented", triton=_HOST)
