"""torch.nn.AdaptiveLogSoftmaxWithLoss: the softmax over a large vocabulary split by frequency
(Grave et al. 2017). A head scores the frequent classes (the shortlist) and one entry per tail
cluster; each cluster has its own small projection and softmax. log p(class) is the head's
log-probability of the class (or of its cluster), plus the cluster's own for a tail class."""
from collections import namedtuple

from .module import Module
from .container import ModuleList, Sequential
from .layers import Linear
from .. import functional as F
from ...ops import functional as O
from ... import creation as C

__all__ = ["AdaptiveLogSoftmaxWithLoss"]

_ASMoutput = namedtuple("_ASMoutput", ["output", "loss"])


class AdaptiveLogSoftmaxWithLoss(Module):
    def __init__(self, in_features, n_classes, cutoffs, div_value=4.0, head_bias=False, device=None, dtype=None):
        super().__init__()
        cutoffs = list(cutoffs)
        if not cutoffs:
            raise ValueError("cutoffs should be a sequence of length larger than 0")
        if cutoffs != sorted(cutoffs) or min(cutoffs) <= 0 or max(cutoffs) > n_classes - 1 or \
                len(set(cutoffs)) != len(cutoffs) or any(int(c) != c for c in cutoffs):
            raise ValueError("cutoffs should be a sequence of unique, positive integers sorted in an increasing order, "
                             "where each value is between 1 and n_classes-1")
        self.in_features = in_features
        self.n_classes = n_classes
        self.cutoffs = cutoffs + [n_classes]
        self.div_value = div_value
        self.head_bias = head_bias
        self.shortlist_size = self.cutoffs[0]
        self.n_clusters = len(self.cutoffs) - 1
        self.head_size = self.shortlist_size + self.n_clusters
        self.head = Linear(in_features, self.head_size, bias=head_bias, device=device, dtype=dtype)
        self.tail = ModuleList()
        for i in range(self.n_clusters):
            hidden = int(in_features // (div_value ** (i + 1)))
            size = self.cutoffs[i + 1] - self.cutoffs[i]
            self.tail.append(Sequential(Linear(in_features, hidden, bias=False, device=device, dtype=dtype),
                                        Linear(hidden, size, bias=False, device=device, dtype=dtype)))

    def reset_parameters(self):
        self.head.reset_parameters()
        for projection in self.tail:
            for layer in projection:
                layer.reset_parameters()

    def forward(self, input_, target_):
        if target_.ndim == 1:
            if input_.shape[0] != target_.shape[0]:
                raise RuntimeError("Input and target should have the same size in the batch dimension.")
            if input_.ndim != 2:
                raise RuntimeError(f"1D target tensor expects 2D input tensors, but found inputs with size "
                                   f"{input_.shape}")
        elif target_.ndim == 0:
            if input_.ndim != 1:
                raise RuntimeError(f"0D target tensor expects 1D input tensors, but found inputs with size "
                                   f"{input_.shape}")
        else:
            raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
        batched = target_.ndim > 0
        input = input_ if batched else O.unsqueeze(input_, 0)
        target = target_ if batched else O.unsqueeze(target_, 0)
        n = target.shape[0]
        classes = target.tolist()
        if any(not 0 <= c < self.n_classes for c in classes):
            raise RuntimeError(f"Target values should be in [0, {self.n_classes - 1}], but values in range "
                               f"[{min(classes)}, {max(classes)}] were found. ")
        # the head's column for each row: its class in the shortlist, else its cluster's entry
        cluster_of = [next(i for i, hi in enumerate(self.cutoffs) if c < hi) for c in classes]
        column = [c if k == 0 else self.shortlist_size + k - 1 for c, k in zip(classes, cluster_of)]
        head_logprob = F.log_softmax(self.head(input), dim=1)
        output = O.squeeze(O.gather(head_logprob, 1, C.tensor(column).reshape(n, 1)), 1)
        tail_part = None
        for k in range(1, self.n_clusters + 1):
            rows = [r for r in range(n) if cluster_of[r] == k]
            if not rows:
                continue
            idx = C.tensor(rows)
            local = C.tensor([classes[r] - self.cutoffs[k - 1] for r in rows]).reshape(-1, 1)
            logprob = F.log_softmax(self.tail[k - 1](O.index_select(input, 0, idx)), dim=1)
            picked = O.squeeze(O.gather(logprob, 1, local), 1)
            base = C.zeros(n, dtype=input.dtype) if tail_part is None else tail_part
            tail_part = O.index_copy(base, 0, idx, picked)
        if tail_part is not None:
            output = tail_part + output        # (torch's order: the cluster's term, then the head's added)
        loss = O.mean(-output)
        return _ASMoutput(output if batched else O.squeeze(output, 0), loss)

    def _full_log_prob(self, input, head_output):
        head_logprob = F.log_softmax(head_output, dim=1)
        parts = [head_logprob[:, :self.shortlist_size]]
        for i in range(self.n_clusters):
            cluster = F.log_softmax(self.tail[i](input), dim=1)
            parts.append(cluster + O.unsqueeze(head_logprob[:, self.shortlist_size + i], 1))
        return O.cat(parts, 1)

    def log_prob(self, input):
        """log p of every class, (N, n_classes)."""
        return self._full_log_prob(input, self.head(input))

    def predict(self, input):
        """The most probable class of each row: the head's where it picks a shortlist class,
        else the argmax of the full log-probabilities."""
        head_output = self.head(input)
        out = O.argmax(head_output, dim=1)
        outside = out >= self.shortlist_size
        if not bool(outside.any()):
            return out
        if bool(outside.all()):
            return O.argmax(self._full_log_prob(input, head_output), dim=1)
        out[outside] = O.argmax(self._full_log_prob(input[outside], head_output[outside]), dim=1)
        return out
