"""The tutorial survey: short programs in the style of PyTorch's tutorials and course
notebooks (the 60-minute blitz, learn-the-basics, "what is torch.nn really", MNIST/CIFAR
training loops, text RNNs, the transformer tutorial, tensor cheat-sheets), each run twice:
as written, with `import torch`, and with the word `torch` replaced by `tracegrad` and
nothing else changed. Each program leaves its answer in `result`; tracegrad's answer must
equal torch's (tensors by dtype, shape and value, Python values by type and value).

Random draws differ between the two libraries' generators, so a program that draws
compares what does not depend on the draw (shapes, ranges, reproducibility under a seed)
or gives its model fixed weights with `det_init` (numpy's generator, copied in with the
library's own `copy_`). Probes of torch.fft are counted
but excluded: tracegrad does not provide it (see the README's table).

`python tests/test_tutorial_survey.py` prints the counts: probes, torch passes, tracegrad
passes, and the names of the probes tracegrad fails."""
import re
import textwrap
import traceback
from functools import lru_cache

import numpy as np
import pytest
import torch as real_torch

import tracegrad

PRELUDE = '''
import numpy as np
import torch

def det_init(model, scale=0.3, seed=0):
    rng = np.random.default_rng(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.from_numpy((rng.standard_normal(tuple(p.shape)) * scale).astype(np.float32)))
    return model

def det_data(*shape, seed=1):
    return torch.from_numpy(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))
'''

EXCLUDED = {"fft_rfft"}

# name: code, or (code, tolerances)
PROBES = {
    # -- learn the basics: tensors -----------------------------------------------------------
    "tensor_from_data": '''
data = [[1, 2], [3, 4]]
x_data = torch.tensor(data)
result = x_data, x_data.dtype
''',
    "from_numpy_shares_memory": '''
np_array = np.array([[1, 2], [3, 4]])
x_np = torch.from_numpy(np_array)
np.multiply(np_array, 2, out=np_array)
result = x_np
''',
    "ones_like_rand_like": '''
x_data = torch.tensor([[1, 2], [3, 4]])
x_ones = torch.ones_like(x_data)
x_rand = torch.rand_like(x_data, dtype=torch.float)
result = x_ones, x_rand.shape, x_rand.dtype, bool(((x_rand >= 0) & (x_rand < 1)).all())
''',
    "shape_tuple_creation": '''
shape = (2, 3,)
rand_tensor = torch.rand(shape)
result = rand_tensor.shape, torch.ones(shape), torch.zeros(shape)
''',
    "tensor_attributes": '''
tensor = torch.rand(3, 4)
result = tensor.shape, tensor.dtype, str(tensor.device), tensor.size(1), tensor.ndim, tensor.dim(), tensor.numel()
''',
    "indexing_slicing": '''
tensor = torch.ones(4, 4)
tensor[:, 1] = 0
result = tensor[0], tensor[:, 0], tensor[..., -1], tensor
''',
    "cat_dim1": '''
tensor = torch.arange(16.).reshape(4, 4)
t1 = torch.cat([tensor, tensor, tensor], dim=1)
result = t1, torch.cat((tensor, tensor)).shape
''',
    "matmul_with_out": '''
tensor = torch.arange(16.).reshape(4, 4)
y1 = tensor @ tensor.T
y2 = tensor.matmul(tensor.T)
y3 = torch.rand_like(y1)
torch.matmul(tensor, tensor.T, out=y3)
z1 = tensor * tensor
z2 = tensor.mul(tensor)
z3 = torch.rand_like(tensor)
torch.mul(tensor, tensor, out=z3)
result = y1, y2, y3, z1, z2, z3
''',
    "single_element_item": '''
tensor = torch.arange(16.).reshape(4, 4)
agg = tensor.sum()
agg_item = agg.item()
result = agg_item, type(agg_item).__name__, torch.tensor([3]).item(), type(torch.tensor(True).item()).__name__
''',
    "inplace_add_": '''
tensor = torch.ones(2, 3)
tensor.add_(5)
tensor.mul_(2).sub_(1).div_(3)
result = tensor
''',
    "numpy_bridge": '''
t = torch.ones(5)
n = t.numpy()
t.add_(1)
n2 = np.ones(5)
t2 = torch.from_numpy(n2)
np.add(n2, 1, out=n2)
result = n.copy(), t2
''',
    "print_tensor": '''
result = str(torch.tensor([[1., 2.5], [3., 4.]])), repr(torch.tensor([1, 2, 3])), str(torch.zeros(2, dtype=torch.float64))
''',
    "set_printoptions": '''
torch.set_printoptions(precision=2)
s = str(torch.tensor([1.23456, 2.5]))
torch.set_printoptions(profile="default")
result = s, str(torch.tensor([1.23456, 2.5]))
''',
    # -- tensor cheat-sheet ------------------------------------------------------------------
    "view_reshape": '''
x = torch.arange(24)
result = x.view(2, 3, 4), x.view(-1, 6).shape, x.reshape(4, -1), torch.reshape(x, (2, 12)).shape, x.view(2, 12).view(24).shape
''',
    "permute_transpose_contiguous": '''
x = torch.arange(24).reshape(2, 3, 4)
p = x.permute(2, 0, 1)
t = x.transpose(0, 1)
result = p, t.shape, t.is_contiguous(), t.contiguous().is_contiguous(), x.t() if x.dim() == 2 else x.mT.shape
''',
    "squeeze_unsqueeze": '''
x = torch.zeros(2, 1, 3, 1)
result = x.squeeze().shape, x.squeeze(1).shape, x.unsqueeze(0).shape, torch.unsqueeze(x, -1).shape, x.squeeze(-1).shape, x[None].shape, x[:, None].shape
''',
    "stack": '''
a = torch.tensor([1, 2, 3]); b = torch.tensor([4, 5, 6])
result = torch.stack([a, b]), torch.stack((a, b), dim=1), torch.hstack([a, b]), torch.vstack([a, b])
''',
    "gather": '''
t = torch.tensor([[1, 2], [3, 4]])
result = torch.gather(t, 1, torch.tensor([[0, 0], [1, 0]])), t.gather(0, torch.tensor([[1, 0]]))
''',
    "scatter": '''
src = torch.arange(1, 11).reshape((2, 5))
index = torch.tensor([[0, 1, 2, 0]])
a = torch.zeros(3, 5, dtype=src.dtype).scatter_(0, index, src)
b = torch.zeros(3, 5, dtype=src.dtype).scatter_add_(0, torch.tensor([[0, 1, 2, 0, 0], [2, 0, 0, 1, 2]]), src)
c = torch.full((2, 4), 2.).scatter(1, torch.tensor([[2], [3]]), 1.23)
result = a, b, c
''',
    "one_hot_via_scatter": '''
labels = torch.tensor([0, 2, 1])
result = torch.zeros(3, 4).scatter_(1, labels.unsqueeze(1), 1.0)
''',
    "where": '''
x = torch.tensor([[-1., 2.], [3., -4.]])
result = torch.where(x > 0, x, torch.zeros_like(x)), torch.where(x > 0, x, 0.), torch.where(x < 0), x.where(x > 0, -x)
''',
    "masked_fill": '''
x = torch.arange(6.).reshape(2, 3)
mask = x > 2
y = x.masked_fill(mask, float('-inf'))
x.masked_fill_(~mask, -1.)
result = y, x
''',
    "clamp": '''
x = torch.linspace(-2, 2, 9)
result = torch.clamp(x, -1, 1), x.clamp(min=0), x.clamp(max=0.5), torch.clip(x, -0.5, 0.5), x.clamp_min(1), x.clone().clamp_(0, 1)
''',
    "argmax_max_dim": '''
x = torch.tensor([[1., 5., 3.], [7., 2., 9.]])
values, indices = torch.max(x, dim=1)
m = x.max(1)
result = x.argmax(), x.argmax(dim=1), x.argmin(0, keepdim=True), values, indices, m.values, m.indices, x.max(), torch.max(x, torch.tensor(4.))
''',
    "topk": '''
x = torch.tensor([1., 4., 2., 8., 5., 7.])
v, i = torch.topk(x, 3)
r = x.reshape(2, 3).topk(2, dim=1, largest=False)
result = v, i, r.values, r.indices
''',
    "sort_argsort": '''
x = torch.tensor([[3., 1., 2.], [9., 7., 8.]])
s = torch.sort(x, descending=True)
result = s.values, s.indices, torch.argsort(x, dim=1), x.sort(dim=0).values
''',
    "cumsum_cumprod": '''
x = torch.arange(1., 7.).reshape(2, 3)
result = torch.cumsum(x, dim=1), x.cumsum(0), torch.cumprod(x, dim=1)
''',
    "einsum": '''
a = torch.arange(6.).reshape(2, 3); b = torch.arange(12.).reshape(3, 4)
x = torch.arange(24.).reshape(2, 3, 4); y = torch.arange(40.).reshape(2, 4, 5)
result = torch.einsum('ij,jk->ik', a, b), torch.einsum('bij,bjk->bik', x, y), torch.einsum('ii', torch.eye(3)), torch.einsum('i,j->ij', torch.arange(3.), torch.arange(2.))
''',
    "bmm_mm_mv": '''
x = torch.arange(24.).reshape(2, 3, 4); y = torch.arange(40.).reshape(2, 4, 5)
m = torch.arange(6.).reshape(2, 3)
result = torch.bmm(x, y), torch.mm(m, m.T), torch.mv(m, torch.ones(3)), torch.dot(torch.ones(3), torch.arange(3.)), torch.outer(torch.arange(2.), torch.arange(3.))
''',
    "expand_repeat": '''
x = torch.tensor([[1], [2], [3]])
result = x.expand(3, 4), x.expand(-1, 2), x.repeat(2, 3), x.expand_as(torch.zeros(3, 5)).shape, torch.tensor([1, 2]).repeat_interleave(2)
''',
    "flip_roll": '''
x = torch.arange(6).reshape(2, 3)
result = torch.flip(x, [0, 1]), x.flip(1), torch.roll(x, 1), torch.roll(x, shifts=1, dims=1), torch.fliplr(x)
''',
    "tril_triu": '''
a = torch.ones(4, 4)
result = torch.tril(a), torch.triu(a, diagonal=1), a.tril(-1), torch.triu(torch.ones(3, 3) * float('-inf'), diagonal=1)
''',
    "arange_linspace_logspace": '''
result = torch.arange(5), torch.arange(1, 4), torch.arange(1, 2.5, 0.5), torch.linspace(-10, 10, steps=5), torch.logspace(start=-2, end=2, steps=5), torch.arange(0, 10, 3).dtype
''',
    "eye_full_empty": '''
result = torch.eye(3), torch.eye(2, 3), torch.full((2, 2), 7), torch.full((2,), 3.5), torch.empty(2, 3).shape, torch.zeros(2, dtype=torch.long).fill_(3)
''',
    "zeros_like_new_ones": '''
x = torch.tensor([[1., 2.]], dtype=torch.float64)
result = torch.zeros_like(x), torch.full_like(x, 4), x.new_zeros(3), x.new_ones((2, 2)), x.new_full((2,), 5.), x.new_tensor([1, 2]), torch.empty_like(x).shape
''',
    "manual_seed_reproducible": '''
torch.manual_seed(42)
a = torch.randn(3, 4); b = torch.rand(2); c = torch.randint(0, 10, (5,))
torch.manual_seed(42)
a2 = torch.randn(3, 4); b2 = torch.rand(2); c2 = torch.randint(0, 10, (5,))
result = torch.equal(a, a2), torch.equal(b, b2), torch.equal(c, c2), c.dtype, bool(((c >= 0) & (c < 10)).all())
''',
    "randn_stats": '''
torch.manual_seed(0)
x = torch.randn(100000)
result = abs(x.mean().item()) < 0.02, abs(x.std().item() - 1) < 0.02, x.dtype, torch.randn(2, 3, dtype=torch.float64).dtype
''',
    "randperm_randint": '''
torch.manual_seed(0)
p = torch.randperm(10)
r = torch.randint(3, 7, (2, 3))
result = torch.sort(p).values, p.dtype, r.shape, bool((r >= 3).all() and (r < 7).all()), torch.randint_like(r, 2).shape
''',
    "type_casts": '''
x = torch.tensor([1.7, -2.3, 0.0])
result = x.long(), x.int(), x.double(), x.half().dtype, x.bool(), x.to(torch.int16), x.type(torch.int32), x.float().dtype, x.to(dtype=torch.float64).dtype, torch.tensor([1, 2]).float()
''',
    "type_promotion": '''
i = torch.tensor([1, 2, 3])
result = i / 2, i * 1.5, i // 2, (i + torch.tensor([0.5])).dtype, (i.float() + i.double()).dtype, i.sum().dtype, (i > 1).sum(), torch.tensor([True, False]).float().mean()
''',
    "tolist_item": '''
x = torch.tensor([[1, 2], [3, 4]])
result = x.tolist(), torch.tensor([1.5, 2.5]).tolist(), torch.tensor(3.5).tolist(), x[1, 1].item()
''',
    "chunk_split": '''
x = torch.arange(10)
result = x.chunk(3), torch.split(x, 4), x.split([2, 3, 5]), torch.tensor_split(x, 3), x.reshape(2, 5).unbind(0)
''',
    "nonzero": '''
x = torch.tensor([[0, 1], [2, 0]])
result = torch.nonzero(x), x.nonzero(as_tuple=True), torch.count_nonzero(x), torch.argwhere(x)
''',
    "unique": '''
x = torch.tensor([3, 1, 2, 3, 1, 1])
u, counts = torch.unique(x, return_counts=True)
u2, inv = x.unique(sorted=True, return_inverse=True)
result = u, counts, u2, inv, torch.unique(torch.tensor([[1, 2], [1, 2], [0, 1]]), dim=0)
''',
    "nan_inf_checks": '''
x = torch.tensor([1., float('nan'), float('inf'), -float('inf')])
result = torch.isnan(x), torch.isinf(x), torch.isfinite(x), torch.nan_to_num(x), x.isnan().any(), torch.nan_to_num(x, nan=0.0, posinf=1.0, neginf=-1.0)
''',
    "mean_std_var": '''
x = torch.tensor([[1., 2., 3.], [4., 5., 7.]])
result = x.mean(), x.mean(dim=0), x.std(), x.std(dim=1, unbiased=False), x.var(1), torch.var(x, dim=0, correction=0), torch.std_mean(x, dim=1), torch.var_mean(x)
''',
    "reduce_multi_dim": '''
x = torch.arange(24.).reshape(2, 3, 4)
result = torch.sum(x, dim=(0, 1)), x.mean(dim=[0, 2], keepdim=True), x.sum(-1, keepdim=True).shape, x.prod(1), x.amax(dim=(1, 2)), x.amin(0), torch.logsumexp(x, dim=2)
''',
    "bool_mask_indexing": '''
x = torch.tensor([[1., -2.], [-3., 4.]])
pos = x[x > 0]
x[x < 0] = 0
result = pos, x, torch.masked_select(x, x > 1)
''',
    "fancy_indexing": '''
x = torch.arange(12).reshape(3, 4)
idx = torch.tensor([2, 0])
result = x[idx], x[:, idx], x[[0, 2], [1, 3]], torch.index_select(x, 1, idx), x[idx, 1:3], x[torch.tensor([True, False, True])]
''',
    "index_assign": '''
x = torch.zeros(3, 4)
x[0] = 1
x[1, 2:] = torch.tensor([5., 6.])
x[:, 0] += 2
x[torch.tensor([2]), torch.tensor([3])] = 9
result = x
''',
    "broadcasting": '''
a = torch.arange(3.).reshape(3, 1); b = torch.arange(4.)
result = a + b, a * b, (a - b).shape, torch.broadcast_tensors(a, b)[0].shape, a.add(b, alpha=2), torch.broadcast_shapes((3, 1), (1, 4))
''',
    "comparisons": '''
a = torch.tensor([1., 2., 3.]); b = torch.tensor([1., 2.5, 3.])
result = a == b, torch.eq(a, b), a.ne(b), a < b, torch.ge(a, 2), torch.equal(a, a.clone()), torch.allclose(a, b + 1e-9 * 0, atol=0.6), torch.isclose(a, b)
''',
    "norms": '''
x = torch.tensor([[3., 4.], [6., 8.]])
result = x.norm(), torch.norm(x, dim=1), x.norm(p=1, dim=0), torch.linalg.norm(x), torch.linalg.vector_norm(x, ord=float('inf')), torch.nn.functional.normalize(x, dim=1)
''',
    "diag_trace": '''
x = torch.arange(9.).reshape(3, 3)
result = torch.diag(x), torch.diag(torch.tensor([1., 2.])), x.diagonal(), torch.trace(x), torch.diag_embed(torch.tensor([1., 2.]))
''',
    "meshgrid": '''
xs = torch.linspace(0, 1, 3); ys = torch.linspace(0, 1, 2)
gx, gy = torch.meshgrid(xs, ys, indexing='ij')
hx, hy = torch.meshgrid(xs, ys, indexing='xy')
result = gx, gy, hx.shape, hy
''',
    "elementwise_math": '''
x = torch.tensor([0.5, 1.0, 2.0])
result = torch.abs(-x), torch.sqrt(x), torch.exp(x), torch.log(x), torch.sin(x), x.pow(2), x ** 0.5, torch.rsqrt(x), torch.sigmoid(x), torch.tanh(x), torch.log1p(x), torch.expm1(x), torch.log2(x), torch.log10(x), torch.reciprocal(x), torch.square(x), torch.erf(x)
''',
    "rounding": '''
x = torch.tensor([-1.5, -0.5, 0.4, 1.5, 2.7])
result = torch.floor(x), torch.ceil(x), torch.round(x), torch.trunc(x), torch.frac(x), torch.sign(x), torch.round(x * 10, decimals=1) if False else torch.round(torch.tensor([1.234]), decimals=2), x % 1, torch.remainder(x, 2), torch.fmod(x, 2), torch.floor_divide(x, 2), x // 2
''',
    "max_min_elementwise": '''
a = torch.tensor([1., 5., 3.]); b = torch.tensor([4., 2., 6.])
result = torch.maximum(a, b), torch.minimum(a, b), torch.max(a, b), torch.min(a, b), torch.fmax(a, b)
''',
    "flatten_unflatten": '''
x = torch.arange(24).reshape(2, 3, 4)
result = x.flatten(), torch.flatten(x, 1).shape, x.flatten(0, 1).shape, x.unflatten(2, (2, 2)).shape, torch.ravel(x).shape
''',
    "narrow_select": '''
x = torch.arange(12).reshape(3, 4)
result = x.narrow(1, 1, 2), x.select(0, 1), torch.narrow(x, 0, 0, 2).shape, x.movedim(0, 1).shape, x.swapaxes(0, 1).shape
''',
    "transpose_props": '''
x = torch.arange(6.).reshape(2, 3)
result = x.T, x.t(), x.mT, torch.transpose(x, 0, 1), torch.t(x).shape
''',
    "softmax_logsoftmax": '''
x = torch.tensor([[1., 2., 3.], [1., 1., 1.]])
result = torch.softmax(x, dim=1), x.softmax(-1), torch.log_softmax(x, dim=1), torch.nn.functional.softmax(x, dim=0), x.log_softmax(1).exp().sum(1)
''',
    "clone_detach_requires_grad": '''
a = torch.tensor([1., 2.], requires_grad=True)
b = a.clone(); c = a.detach(); d = a.detach().clone().requires_grad_(True)
e = torch.zeros(2).requires_grad_()
result = b.requires_grad, c.requires_grad, d.requires_grad, e.requires_grad, a.is_leaf, b.is_leaf, b.grad_fn is not None, d.is_leaf
''',
    "is_tensor_and_isinstance": '''
x = torch.tensor([1.])
result = torch.is_tensor(x), isinstance(x, torch.Tensor), torch.is_floating_point(x), torch.numel(torch.zeros(3, 4)), torch.get_default_dtype(), x.is_floating_point(), torch.tensor([1]).is_floating_point()
''',
    "legacy_tensor_types": '''
a = torch.FloatTensor([1, 2]); b = torch.LongTensor([3, 4])
result = a, b, torch.Tensor([1, 2]), torch.Tensor(2, 3).shape, a.type()
''',
    "cdist_knn": '''
a = torch.tensor([[0., 0.], [1., 1.], [3., 4.]]); b = torch.tensor([[0., 1.], [3., 3.]])
d = torch.cdist(a, b)
result = d, d.argmin(dim=1), torch.cdist(a, b, p=1)
''',
    "bincount_histc": '''
x = torch.tensor([0, 1, 1, 3, 3, 3])
result = torch.bincount(x), torch.bincount(x, minlength=6), torch.histc(torch.tensor([1., 2., 1.]), bins=4, min=0, max=3)
''',
    "any_all": '''
x = torch.tensor([[True, False], [True, True]])
result = x.any(), x.all(), x.all(dim=1), torch.any(x, 0), (torch.tensor([1, 0]) > 0).any().item()
''',
    "to_device_cpu": '''
device = "cuda" if torch.cuda.is_available() else "cpu"
x = torch.ones(2, device=device)
y = torch.tensor([1., 2.]).to(device)
result = device, str(x.device), y.cpu(), x.device.type, torch.device("cpu") == x.device
''',
    "accelerator_device": '''
device = torch.accelerator.current_accelerator().type if torch.accelerator.is_available() else "cpu"
model = torch.nn.Linear(2, 2).to(device)
result = device, str(next(model.parameters()).device)
''',
    "sum_of_list_and_stack_losses": '''
losses = [torch.tensor(1.5), torch.tensor(2.5), torch.tensor(0.5)]
result = torch.stack(losses).mean(), sum(losses), torch.tensor([l.item() for l in losses]), torch.tensor(np.array([1., 2.]), dtype=torch.float32)
''',
    # -- autograd ----------------------------------------------------------------------------
    "autograd_basic": '''
x = torch.tensor(2.0, requires_grad=True)
y = x ** 2 + 3 * x + 1
y.backward()
result = x.grad, y.grad_fn is not None, x.grad_fn
''',
    "autograd_grad_fn": '''
x = torch.tensor([1., 2., 3.], requires_grad=True)
y = (x * 2).sum()
result = y.grad_fn.name(), type(y.grad_fn).__name__
''',
    "autograd_grad": '''
x = torch.tensor([1., 2.], requires_grad=True)
y = (x ** 3).sum()
g, = torch.autograd.grad(y, x, create_graph=True)
gg, = torch.autograd.grad(g.sum(), x)
result = g, gg, x.grad
''',
    "autograd_grad_allow_unused": '''
x = torch.tensor(1., requires_grad=True); z = torch.tensor(2., requires_grad=True)
gx, gz = torch.autograd.grad(x * 3, [x, z], allow_unused=True)
result = gx, gz
''',
    "register_hook": '''
x = torch.tensor([1., 2.], requires_grad=True)
seen = []
h = x.register_hook(lambda g: seen.append(g.clone()))
(x * 3).sum().backward()
h.remove()
(x * 3).sum().backward()
result = seen, len(seen), x.grad
''',
    "no_grad_detach": '''
w = torch.tensor([1., 2.], requires_grad=True)
with torch.no_grad():
    y = w * 2
z = (w * 2).detach()
result = y.requires_grad, z.requires_grad, torch.is_grad_enabled()
''',
    "grad_accumulation_zero": '''
w = torch.tensor([1., 2.], requires_grad=True)
for _ in range(3):
    (w * w).sum().backward()
acc = w.grad.clone()
w.grad.zero_()
(w * w).sum().backward()
w.grad = None
result = acc, w.grad
''',
    "backward_nonscalar_gradient": '''
x = torch.tensor([1., 2., 3.], requires_grad=True)
y = x * 2
y.backward(torch.tensor([0.1, 1.0, 0.0001]))
result = x.grad
''',
    "backward_twice_error": '''
x = torch.tensor([1.], requires_grad=True)
y = (x.exp() * 2).sum()
y.backward()
try:
    y.backward()
    err = None
except RuntimeError as e:
    err = "RuntimeError"
result = err
''',
    "backward_scalar_only_error": '''
x = torch.tensor([1., 2.], requires_grad=True)
try:
    (x * 2).backward()
    err = None
except RuntimeError as e:
    err = str(e)
result = err
''',
    "jacobian_hessian": '''
def f(x):
    return x ** 2 + x.sin()
x = torch.tensor([0.5, 1.0])
J = torch.autograd.functional.jacobian(f, x)
H = torch.autograd.functional.hessian(lambda x: (x ** 3).sum(), x)
result = J, H
''',
    "manual_gradient_descent": '''
x = torch.linspace(-1, 1, 20)
y = 3 * x + 0.5
w = torch.zeros(1, requires_grad=True); b = torch.zeros(1, requires_grad=True)
lr = 0.1
for epoch in range(50):
    loss = ((w * x + b - y) ** 2).mean()
    loss.backward()
    with torch.no_grad():
        w -= w.grad * lr
        b -= b.grad * lr
        w.grad.zero_()
        b.grad.zero_()
result = w, b, loss.item()
''',
    "data_attribute_update": '''
w = torch.tensor([1., 2.], requires_grad=True)
loss = (w ** 2).sum()
loss.backward()
w.data -= 0.1 * w.grad.data
w.data.zero_() if False else None
result = w.data, w.requires_grad, w.data.requires_grad
''',
    "variable_legacy": '''
from torch.autograd import Variable
v = Variable(torch.tensor([1., 2.]), requires_grad=True)
(v * v).sum().backward()
result = v.grad
''',
    "custom_function": '''
class MyReLU(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input):
        ctx.save_for_backward(input)
        return input.clamp(min=0)
    @staticmethod
    def backward(ctx, grad_output):
        input, = ctx.saved_tensors
        grad_input = grad_output.clone()
        grad_input[input < 0] = 0
        return grad_input
x = torch.tensor([-1., 2., -3., 4.], requires_grad=True)
MyReLU.apply(x).pow(2).sum().backward()
result = x.grad
''',
    "inference_mode_decorator": '''
@torch.no_grad()
def predict(x):
    return x * 2
x = torch.ones(2, requires_grad=True)
with torch.inference_mode():
    y = x + 1
result = predict(x).requires_grad, y.requires_grad
''',
    "retain_grad_nonleaf": '''
x = torch.tensor([1., 2.], requires_grad=True)
y = x * 3
y.retain_grad()
z = (y ** 2).sum()
z.backward()
result = y.grad, x.grad
''',
    # -- nn: build the model -----------------------------------------------------------------
    "nn_module_neural_network": '''
from torch import nn
class NeuralNetwork(nn.Module):
    def __init__(self):
        super().__init__()
        self.flatten = nn.Flatten()
        self.linear_relu_stack = nn.Sequential(
            nn.Linear(4 * 4, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 10))
    def forward(self, x):
        x = self.flatten(x)
        logits = self.linear_relu_stack(x)
        return logits
model = det_init(NeuralNetwork())
X = det_data(3, 4, 4)
logits = model(X)
pred_probab = nn.Softmax(dim=1)(logits)
y_pred = pred_probab.argmax(1)
result = logits, pred_probab, y_pred
''',
    "print_model": '''
from torch import nn
model = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Dropout(0.25), nn.Linear(8 * 4 * 4, 10), nn.LogSoftmax(dim=1))
result = str(model)
''',
    "print_custom_module": '''
from torch import nn
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(100, 16, padding_idx=0)
        self.lstm = nn.LSTM(16, 32, num_layers=2, batch_first=True, dropout=0.1)
        self.fc = nn.Linear(32, 2, bias=False)
        self.act = nn.LeakyReLU(0.1)
        self.ln = nn.LayerNorm(32)
result = str(Net())
''',
    "named_parameters": '''
from torch import nn
model = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2))
result = [(name, tuple(p.shape), p.requires_grad) for name, p in model.named_parameters()], sum(p.numel() for p in model.parameters()), sum(p.numel() for p in model.parameters() if p.requires_grad)
''',
    "state_dict_roundtrip": '''
from torch import nn
m1 = det_init(nn.Sequential(nn.Linear(4, 3), nn.BatchNorm1d(3), nn.Linear(3, 2)))
m2 = nn.Sequential(nn.Linear(4, 3), nn.BatchNorm1d(3), nn.Linear(3, 2))
sd = m1.state_dict()
keys = list(sd.keys())
missing = m2.load_state_dict(sd)
x = det_data(5, 4)
m1.eval(); m2.eval()
result = keys, torch.equal(m1(x), m2(x)), list(missing.missing_keys), list(missing.unexpected_keys)
''',
    "load_state_dict_strict_error": '''
from torch import nn
m = nn.Linear(2, 2)
try:
    m.load_state_dict({"weight": torch.zeros(2, 2)})
    err = None
except RuntimeError as e:
    err = "RuntimeError"
r = m.load_state_dict({"weight": torch.zeros(2, 2)}, strict=False)
result = err, list(r.missing_keys), m.weight
''',
    "save_load_state_dict": '''
from torch import nn
import os
model = det_init(nn.Linear(3, 2))
path = os.path.join(TMP, "model_weights.pth")
torch.save(model.state_dict(), path)
model2 = nn.Linear(3, 2)
model2.load_state_dict(torch.load(path, weights_only=True))
model2.eval()
result = model2.weight, model2.bias
''',
    "save_load_checkpoint": '''
from torch import nn
import os
model = det_init(nn.Linear(3, 2))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
model(det_data(4, 3)).sum().backward()
optimizer.step()
path = os.path.join(TMP, "ckpt.pt")
torch.save({"epoch": 5, "model_state_dict": model.state_dict(), "optimizer_state_dict": optimizer.state_dict(), "loss": 0.25}, path)
checkpoint = torch.load(path, map_location="cpu")
model2 = nn.Linear(3, 2); opt2 = torch.optim.SGD(model2.parameters(), lr=0.5)
model2.load_state_dict(checkpoint["model_state_dict"])
opt2.load_state_dict(checkpoint["optimizer_state_dict"])
result = checkpoint["epoch"], checkpoint["loss"], model2.weight, opt2.param_groups[0]["lr"], opt2.param_groups[0]["momentum"]
''',
    "save_load_tensors": '''
import os
path = os.path.join(TMP, "tensors.pt")
torch.save({"a": torch.arange(3), "b": [torch.ones(2), 3]}, path)
d = torch.load(path)
result = d["a"], d["b"][0], d["b"][1]
''',
    "eval_train_modes": '''
from torch import nn
model = nn.Sequential(nn.Linear(2, 2), nn.Dropout(0.5))
flags = [model.training, model[1].training]
model.eval()
flags += [model.training, model[1].training]
x = torch.ones(4, 2)
same = torch.equal(model[1](x), x)
model.train()
flags.append(model[1].training)
result = flags, same
''',
    "apply_init_weights": '''
from torch import nn
def init_weights(m):
    if isinstance(m, nn.Linear):
        torch.nn.init.xavier_uniform_(m.weight)
        m.bias.data.fill_(0.01)
model = nn.Sequential(nn.Linear(20, 30), nn.ReLU(), nn.Linear(30, 5))
model.apply(init_weights)
bound = (6 / (20 + 30)) ** 0.5
result = model[0].bias, bool(model[0].weight.abs().max() <= bound), model[2].bias
''',
    "nn_init_functions": '''
from torch import nn
w = torch.empty(64, 32)
nn.init.constant_(w, 0.3); c = w.clone()
nn.init.zeros_(w); z = w.clone()
nn.init.ones_(w); o = w.clone()
nn.init.uniform_(w, a=-0.1, b=0.1); u = bool(w.abs().max() <= 0.1)
torch.manual_seed(0)
nn.init.normal_(w, mean=0.0, std=0.02); n = abs(w.std().item() - 0.02) < 0.003
nn.init.kaiming_normal_(w, mode='fan_out', nonlinearity='relu'); k = abs(w.std().item() - (2 / 64) ** 0.5) < 0.03
nn.init.kaiming_uniform_(w, a=5 ** 0.5); ku = bool(w.abs().max() <= 1 / 32 ** 0.5 + 1e-6)
nn.init.xavier_normal_(w); xn = w.shape
nn.init.trunc_normal_(w, std=0.02); tn = bool(w.abs().max() <= 2)
nn.init.eye_(torch.empty(3, 3))
q = nn.init.orthogonal_(torch.empty(4, 4))
result = c[0, 0], z.sum(), o.sum(), u, n, k, ku, xn, tn, torch.allclose(q @ q.T, torch.eye(4), atol=1e-5), nn.init.calculate_gain('relu'), nn.init.calculate_gain('tanh')
''',
    "module_list": '''
from torch import nn
class MyModule(nn.Module):
    def __init__(self):
        super().__init__()
        self.linears = nn.ModuleList([nn.Linear(4, 4) for i in range(3)])
    def forward(self, x):
        for i, l in enumerate(self.linears):
            x = self.linears[i // 2](x) + l(x)
        return x
m = det_init(MyModule())
out = m(det_data(2, 4))
m.linears.append(nn.Linear(4, 4))
m.linears.extend([nn.ReLU()])
result = out, len(m.linears), len(list(m.parameters())), type(m.linears[-1]).__name__
''',
    "module_dict": '''
from torch import nn
class MyModule(nn.Module):
    def __init__(self):
        super().__init__()
        self.choices = nn.ModuleDict({'conv': nn.Conv2d(2, 3, 3), 'pool': nn.MaxPool2d(3)})
        self.activations = nn.ModuleDict([['lrelu', nn.LeakyReLU()], ['prelu', nn.PReLU()]])
    def forward(self, x, choice, act):
        return self.activations[act](self.choices[choice](x))
m = det_init(MyModule())
result = m(det_data(1, 2, 5, 5), 'conv', 'prelu'), list(m.choices.keys()), 'pool' in m.choices
''',
    "parameter_list_dict": '''
from torch import nn
class MyModule(nn.Module):
    def __init__(self):
        super().__init__()
        self.params = nn.ParameterList([nn.Parameter(torch.ones(2, 2) * i) for i in range(3)])
        self.pd = nn.ParameterDict({'left': nn.Parameter(torch.ones(2)), 'right': nn.Parameter(torch.zeros(2))})
    def forward(self, x):
        for p in self.params:
            x = x @ p + 1
        return x * self.pd['left'] + self.pd['right']
m = MyModule()
result = m(torch.ones(1, 2)), [n for n, _ in m.named_parameters()]
''',
    "sequential_ordered_dict": '''
from collections import OrderedDict
from torch import nn
model = nn.Sequential(OrderedDict([('fc1', nn.Linear(3, 4)), ('relu1', nn.ReLU()), ('fc2', nn.Linear(4, 1))]))
det_init(model)
result = model(det_data(2, 3)), len(model), type(model[0]).__name__, model.fc1.weight.shape, type(model[1:]).__name__, [n for n, _ in model.named_children()]
''',
    "parameter_and_buffer": '''
from torch import nn
class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.ones(2))
        self.register_buffer('running', torch.zeros(2))
        self.register_buffer('tmp', torch.ones(1), persistent=False)
    def forward(self, x):
        self.running += x.detach()
        return x * self.w
m = M()
m(torch.tensor([1., 2.]))
result = list(m.state_dict().keys()), [n for n, _ in m.named_buffers()], m.running, isinstance(m.w, torch.Tensor), m.w.requires_grad
''',
    "modules_children": '''
from torch import nn
model = nn.Sequential(nn.Sequential(nn.Linear(2, 2), nn.ReLU()), nn.Linear(2, 1))
result = len(list(model.modules())), len(list(model.children())), [n for n, _ in model.named_modules()]
''',
    "freeze_and_replace_head": '''
from torch import nn
model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
for param in model.parameters():
    param.requires_grad = False
model[2] = nn.Linear(8, 5)
trainable = [n for n, p in model.named_parameters() if p.requires_grad]
opt = torch.optim.SGD(filter(lambda p: p.requires_grad, model.parameters()), lr=0.1)
model(torch.ones(2, 4)).sum().backward()
result = trainable, model[0].weight.grad, model[2].weight.grad is not None, len(opt.param_groups[0]['params'])
''',
    "model_double_dtype": '''
from torch import nn
model = nn.Linear(2, 2).double()
m2 = nn.Linear(2, 2).to(torch.float64)
m3 = nn.Linear(2, 2).float()
result = model.weight.dtype, m2.bias.dtype, m3.weight.dtype, model(torch.ones(1, 2, dtype=torch.float64)).dtype
''',
    "embedding_padding_idx": '''
from torch import nn
emb = nn.Embedding(10, 3, padding_idx=0)
det_init(emb)
with torch.no_grad():
    emb.weight[0].fill_(0)
idx = torch.tensor([[0, 2, 4], [4, 3, 0]])
out = emb(idx)
out.sum().backward()
result = out, emb.weight.grad
''',
    "embedding_from_pretrained": '''
from torch import nn
weight = torch.tensor([[1., 2.3, 3.], [4., 5.1, 6.3]])
embedding = nn.Embedding.from_pretrained(weight)
e2 = nn.Embedding.from_pretrained(weight, freeze=False)
result = embedding(torch.LongTensor([1])), embedding.weight.requires_grad, e2.weight.requires_grad
''',
    "dropout_train_stats": '''
from torch import nn
torch.manual_seed(0)
m = nn.Dropout(p=0.2)
x = torch.ones(200, 100)
y = m(x)
frac = (y == 0).float().mean().item()
result = abs(frac - 0.2) < 0.01, sorted(set(y.unique().tolist())), nn.functional.dropout(x, 0.5, training=False).equal(x)
''',
    "batchnorm1d": '''
from torch import nn
bn = nn.BatchNorm1d(3, momentum=0.1)
x = det_data(8, 3) * 2 + 1
y = bn(x)
rm, rv, nb = bn.running_mean.clone(), bn.running_var.clone(), bn.num_batches_tracked.clone()
bn.eval()
result = y, rm, rv, nb, bn(x)
''',
    "batchnorm2d": '''
from torch import nn
bn = nn.BatchNorm2d(2, affine=True)
x = det_data(4, 2, 3, 3)
y = bn(x)
y.sum().backward()
result = y, bn.running_var, bn.weight.grad, bn.bias.grad
''',
    "pooling": '''
from torch import nn
x = det_data(1, 2, 6, 6)
result = nn.MaxPool2d(2)(x), nn.MaxPool2d(3, stride=2, padding=1)(x), nn.AvgPool2d(2, stride=2)(x), nn.MaxPool1d(2)(x[0]), nn.AvgPool1d(3)(x[0])
''',
    "adaptive_pool": '''
from torch import nn
x = det_data(2, 3, 7, 5)
result = nn.AdaptiveAvgPool2d((1, 1))(x), nn.AdaptiveAvgPool2d(1)(x).shape, nn.AdaptiveAvgPool2d((3, 2))(x), nn.AdaptiveMaxPool2d((2, 2))(x), nn.AdaptiveAvgPool1d(2)(x[0])
''',
    "flatten_unflatten_modules": '''
from torch import nn
x = torch.arange(24.).reshape(2, 3, 4)
result = nn.Flatten()(x).shape, nn.Flatten(0, 1)(x).shape, nn.Unflatten(1, (3, 2, 2))(nn.Flatten()(x)).shape, nn.Identity()(x).equal(x)
''',
    "conv2d_variants": '''
from torch import nn
x = det_data(2, 4, 8, 8)
c1 = det_init(nn.Conv2d(4, 6, kernel_size=3, stride=2, padding=1))
c2 = det_init(nn.Conv2d(4, 4, 3, padding='same', groups=2, bias=False))
c3 = det_init(nn.Conv2d(4, 2, (3, 1), dilation=(2, 1)))
result = c1(x), c2(x), c3(x).shape
''',
    "conv1d_text": '''
from torch import nn
emb = det_init(nn.Embedding(20, 8))
conv = det_init(nn.Conv1d(8, 4, kernel_size=3, padding=1))
tokens = torch.tensor([[1, 5, 7, 2, 0], [3, 3, 9, 11, 4]])
h = conv(emb(tokens).permute(0, 2, 1))
pooled = nn.functional.max_pool1d(h, h.shape[2]).squeeze(2)
result = h, pooled
''',
    "layernorm_groupnorm": '''
from torch import nn
x = det_data(2, 4, 3)
ln = nn.LayerNorm(3); gn = nn.GroupNorm(2, 4); ln2 = nn.LayerNorm([4, 3], elementwise_affine=False)
result = ln(x), gn(x), ln2(x)
''',
    "activations_modules": '''
from torch import nn
x = torch.linspace(-3, 3, 7)
mods = [nn.ReLU(), nn.LeakyReLU(0.2), nn.ELU(), nn.GELU(), nn.GELU(approximate='tanh'), nn.SiLU(), nn.Sigmoid(), nn.Tanh(), nn.Softplus(), nn.Hardtanh(), nn.ReLU6(), nn.Mish(), nn.SELU(), nn.Softsign(), nn.Hardswish(), nn.Hardsigmoid(), nn.LogSigmoid(), nn.Tanhshrink(), nn.CELU(), nn.Threshold(0.5, 0.0), nn.Softmin(dim=0)]
result = [m(x) for m in mods]
''',
    "prelu_grad": '''
from torch import nn
m = nn.PReLU()
x = torch.tensor([-2., 1., -0.5], requires_grad=True)
m(x).sum().backward()
result = m(x), m.weight.grad, x.grad
''',
    # -- losses ------------------------------------------------------------------------------
    "cross_entropy_basic": '''
from torch import nn
loss_fn = nn.CrossEntropyLoss()
logits = det_data(4, 5).requires_grad_()
target = torch.tensor([1, 0, 4, 2])
loss = loss_fn(logits, target)
loss.backward()
result = loss, logits.grad
''',
    "cross_entropy_ignore_index": '''
from torch import nn
logits = det_data(5, 3)
target = torch.tensor([1, -100, 2, 0, -100])
result = nn.CrossEntropyLoss()(logits, target), nn.CrossEntropyLoss(ignore_index=0)(logits, torch.tensor([1, 0, 2, 0, 1])), nn.functional.cross_entropy(logits, target, reduction='none')
''',
    "cross_entropy_label_smoothing": '''
from torch import nn
logits = det_data(4, 3)
target = torch.tensor([0, 1, 2, 1])
result = nn.CrossEntropyLoss(label_smoothing=0.1)(logits, target), nn.functional.cross_entropy(logits, target, label_smoothing=0.2, reduction='sum')
''',
    "cross_entropy_weights": '''
from torch import nn
logits = det_data(4, 3)
target = torch.tensor([0, 1, 2, 1])
w = torch.tensor([1., 2., 0.5])
result = nn.CrossEntropyLoss(weight=w)(logits, target), nn.CrossEntropyLoss(weight=w, reduction='sum')(logits, target), nn.CrossEntropyLoss(weight=w, label_smoothing=0.1)(logits, target)
''',
    "cross_entropy_soft_targets": '''
from torch import nn
logits = det_data(3, 4)
probs = torch.softmax(det_data(3, 4, seed=2), dim=1)
result = nn.CrossEntropyLoss()(logits, probs)
''',
    "cross_entropy_sequence": '''
from torch import nn
logits = det_data(2, 5, 7)       # (N, C, L)
target = torch.tensor([[0, 1, 2, 3, 4, 0, 1], [4, 4, 3, 2, 1, 0, -100]])
result = nn.CrossEntropyLoss()(logits, target), nn.functional.cross_entropy(logits.transpose(1, 2).reshape(-1, 5), target.reshape(-1))
''',
    "nll_loss": '''
from torch import nn
m = nn.LogSoftmax(dim=1)
loss = nn.NLLLoss()
inp = det_data(3, 5).requires_grad_()
target = torch.tensor([1, 0, 4])
output = loss(m(inp), target)
output.backward()
result = output, inp.grad, nn.NLLLoss(weight=torch.arange(1., 6.), reduction='sum')(m(inp), target)
''',
    "mse_l1_losses": '''
from torch import nn
a = det_data(3, 4); b = det_data(3, 4, seed=5)
result = nn.MSELoss()(a, b), nn.MSELoss(reduction='sum')(a, b), nn.MSELoss(reduction='none')(a, b), nn.L1Loss()(a, b), nn.SmoothL1Loss()(a, b), nn.HuberLoss(delta=0.5)(a, b), nn.SmoothL1Loss(beta=0.5)(a, b)
''',
    "bce_losses": '''
from torch import nn
logits = det_data(4, 3)
target = torch.tensor([[1., 0., 1.], [0., 0., 1.], [1., 1., 1.], [0., 1., 0.]])
pos_weight = torch.tensor([3., 1., 0.5])
result = nn.BCEWithLogitsLoss()(logits, target), nn.BCEWithLogitsLoss(pos_weight=pos_weight)(logits, target), nn.BCELoss()(torch.sigmoid(logits), target), nn.BCEWithLogitsLoss(weight=torch.tensor([1., 2., 3.]))(logits, target)
''',
    "kl_div_cosine": '''
from torch import nn
import torch.nn.functional as F
inp = F.log_softmax(det_data(3, 5), dim=1)
target = F.softmax(det_data(3, 5, seed=3), dim=1)
a = det_data(3, 5); b = det_data(3, 5, seed=4)
result = nn.KLDivLoss(reduction='batchmean')(inp, target), F.kl_div(inp, target.log(), reduction='sum', log_target=True), F.cosine_similarity(a, b), nn.CosineSimilarity(dim=0)(a, b), F.pairwise_distance(a, b)
''',
    "other_losses": '''
from torch import nn
a = det_data(4, 3); b = det_data(4, 3, seed=6)
y = torch.tensor([1., -1., 1., -1.])
result = nn.CosineEmbeddingLoss()(a, b, y), nn.MarginRankingLoss(margin=0.1)(a[:, 0], b[:, 0], y), nn.SoftMarginLoss()(a[:, 0], y), nn.MultiLabelSoftMarginLoss()(a, (b > 0).float()), nn.TripletMarginLoss()(a, b, a.flip(0)), nn.GaussianNLLLoss()(a, b, torch.ones(4, 3)), nn.PoissonNLLLoss()(a, b.abs())
''',
    # -- optimization ------------------------------------------------------------------------
    "sgd_momentum_nesterov_wd": '''
from torch import nn
model = det_init(nn.Linear(3, 2))
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-2)
x = det_data(5, 3); y = det_data(5, 2, seed=2)
for _ in range(4):
    opt.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
result = model.weight, model.bias, loss
''',
    "sgd_dampening_maximize": '''
from torch import nn
model = det_init(nn.Linear(3, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.5, dampening=0.1)
x = det_data(4, 3)
for _ in range(3):
    opt.zero_grad(); (model(x) ** 2).mean().backward(); opt.step()
result = model.weight
''',
    "adam_amsgrad": '''
from torch import nn
model = det_init(nn.Linear(3, 2))
opt = torch.optim.Adam(model.parameters(), lr=0.01, betas=(0.8, 0.99), amsgrad=True, weight_decay=0.01)
x = det_data(5, 3); y = det_data(5, 2, seed=2)
for _ in range(5):
    opt.zero_grad(); nn.functional.mse_loss(model(x), y).backward(); opt.step()
result = model.weight, model.bias, opt.state_dict()['state'][0]['step']
''',
    "adamw_rmsprop_adagrad": '''
from torch import nn
x = det_data(5, 3); y = det_data(5, 2, seed=2)
out = []
for make in [lambda p: torch.optim.AdamW(p, lr=0.01), lambda p: torch.optim.RMSprop(p, lr=0.01, momentum=0.5), lambda p: torch.optim.Adagrad(p, lr=0.1)]:
    model = det_init(nn.Linear(3, 2))
    opt = make(model.parameters())
    for _ in range(4):
        opt.zero_grad(); nn.functional.mse_loss(model(x), y).backward(); opt.step()
    out.append(model.weight.detach().clone())
result = out
''',
    "zero_grad_set_to_none": '''
from torch import nn
model = nn.Linear(2, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
model(torch.ones(1, 2)).sum().backward()
opt.zero_grad()
a = model.weight.grad
model(torch.ones(1, 2)).sum().backward()
opt.zero_grad(set_to_none=False)
b = model.weight.grad
model(torch.ones(1, 2)).sum().backward()
model.zero_grad()
result = a, b, model.weight.grad
''',
    "param_groups": '''
from torch import nn
model = det_init(nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 1)))
opt = torch.optim.SGD([{'params': model[0].parameters()}, {'params': model[1].parameters(), 'lr': 1e-3}], lr=1e-2, momentum=0.9)
for g in opt.param_groups:
    g['lr'] *= 0.5
model(torch.ones(3, 2)).sum().backward()
opt.step()
result = [g['lr'] for g in opt.param_groups], model[0].weight, model[1].weight, len(opt.param_groups)
''',
    "optimizer_state_dict": '''
from torch import nn
model = det_init(nn.Linear(2, 1))
opt = torch.optim.Adam(model.parameters(), lr=0.1)
model(torch.ones(1, 2)).sum().backward(); opt.step()
sd = opt.state_dict()
result = sorted(sd.keys()), sd['param_groups'][0]['lr'], sd['param_groups'][0]['params'], sorted(sd['state'][0].keys()), sd['state'][0]['exp_avg']
''',
    "lr_scheduler_steplr": '''
from torch import nn
model = nn.Linear(2, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.5)
lrs = []
for epoch in range(6):
    optimizer.step()
    lrs.append(scheduler.get_last_lr()[0])
    scheduler.step()
result = lrs, optimizer.param_groups[0]['lr'], scheduler.state_dict()['last_epoch']
''',
    "lr_schedulers_more": '''
from torch import nn
out = []
for make in [lambda o: torch.optim.lr_scheduler.MultiStepLR(o, milestones=[2, 4], gamma=0.1),
             lambda o: torch.optim.lr_scheduler.ExponentialLR(o, gamma=0.9),
             lambda o: torch.optim.lr_scheduler.CosineAnnealingLR(o, T_max=5, eta_min=0.01),
             lambda o: torch.optim.lr_scheduler.LambdaLR(o, lr_lambda=lambda epoch: 0.95 ** epoch),
             lambda o: torch.optim.lr_scheduler.OneCycleLR(o, max_lr=1.0, total_steps=8),
             lambda o: torch.optim.lr_scheduler.LinearLR(o, start_factor=0.5, total_iters=3)]:
    opt = torch.optim.SGD(nn.Linear(1, 1).parameters(), lr=0.1, momentum=0.9)
    sched = make(opt)
    lrs = []
    for _ in range(6):
        opt.step(); sched.step(); lrs.append(opt.param_groups[0]['lr'])
    out.append(lrs)
result = out
''',
    "reduce_lr_on_plateau": '''
from torch import nn
opt = torch.optim.SGD(nn.Linear(1, 1).parameters(), lr=1.0)
scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, mode='min', factor=0.5, patience=1)
lrs = []
for val_loss in [1.0, 0.9, 0.95, 0.96, 0.97, 0.5, 0.6, 0.7]:
    scheduler.step(val_loss)
    lrs.append(opt.param_groups[0]['lr'])
result = lrs
''',
    "clip_grad": '''
from torch import nn
model = det_init(nn.Linear(4, 3), scale=3)
model(det_data(6, 4)).pow(2).sum().backward()
total = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
after = torch.sqrt(sum((p.grad ** 2).sum() for p in model.parameters()))
torch.nn.utils.clip_grad_value_(model.parameters(), clip_value=0.1)
vec = torch.nn.utils.parameters_to_vector(model.parameters())
result = total, after, model.weight.grad, vec.shape
''',
    "clip_grad_norm_inf": '''
from torch import nn
model = det_init(nn.Linear(4, 3), scale=3)
model(det_data(6, 4)).pow(2).sum().backward()
result = nn.utils.clip_grad_norm_(model.parameters(), 0.5, norm_type=float('inf')), model.bias.grad
''',
    # -- datasets & dataloaders --------------------------------------------------------------
    "tensor_dataset_loader": '''
from torch.utils.data import TensorDataset, DataLoader
X = torch.arange(20.).reshape(10, 2); y = torch.arange(10)
ds = TensorDataset(X, y)
loader = DataLoader(ds, batch_size=4, shuffle=False)
batches = [(xb.shape, yb) for xb, yb in loader]
result = len(ds), ds[3], len(loader), batches
''',
    "custom_dataset": '''
from torch.utils.data import Dataset, DataLoader
class CustomDataset(Dataset):
    def __init__(self, n):
        self.data = [(torch.full((3,), float(i)), i % 2) for i in range(n)]
    def __len__(self):
        return len(self.data)
    def __getitem__(self, idx):
        features, label = self.data[idx]
        return features, label
loader = DataLoader(CustomDataset(7), batch_size=3)
out = [(x, y) for x, y in loader]
result = out, out[0][1].dtype
''',
    "dataloader_dict_samples": '''
from torch.utils.data import Dataset, DataLoader
class D(Dataset):
    def __len__(self):
        return 5
    def __getitem__(self, i):
        return {"x": torch.tensor([i, i + 1.]), "label": i, "name": f"s{i}", "w": 0.5 * i}
batch = next(iter(DataLoader(D(), batch_size=2)))
result = batch["x"], batch["label"], batch["name"], batch["w"]
''',
    "dataloader_shuffle_generator": '''
from torch.utils.data import TensorDataset, DataLoader
ds = TensorDataset(torch.arange(20))
def order(seed):
    g = torch.Generator()
    g.manual_seed(seed)
    return torch.cat([b for (b,) in DataLoader(ds, batch_size=6, shuffle=True, generator=g)])
a, b = order(0), order(0)
result = torch.equal(a, b), torch.sort(a).values, len(a)
''',
    "dataloader_drop_last_collate": '''
from torch.utils.data import DataLoader
data = [torch.tensor([i] * (i % 3 + 1)) for i in range(7)]
def collate(batch):
    lengths = torch.tensor([len(x) for x in batch])
    padded = torch.nn.utils.rnn.pad_sequence(batch, batch_first=True, padding_value=-1)
    return padded, lengths
out = list(DataLoader(data, batch_size=3, drop_last=True, collate_fn=collate))
result = out, len(DataLoader(data, batch_size=3, drop_last=True))
''',
    "pad_sequence": '''
from torch.nn.utils.rnn import pad_sequence
a = torch.ones(25, 3); b = torch.ones(22, 3); c = torch.ones(15, 3)
result = pad_sequence([a, b, c]).size(), pad_sequence([a, b, c], batch_first=True).shape, pad_sequence([torch.tensor([1, 2, 3]), torch.tensor([4])], batch_first=True)
''',
    "random_split_subset": '''
from torch.utils.data import TensorDataset, random_split, Subset
ds = TensorDataset(torch.arange(10))
train, val = random_split(ds, [8, 2], generator=torch.Generator().manual_seed(42))
a, b, c = random_split(ds, [0.5, 0.3, 0.2])
sub = Subset(ds, [1, 3, 5])
idx = sorted(list(train.indices) + list(val.indices))
result = len(train), len(val), idx, (len(a), len(b), len(c)), sub[1], len(sub)
''',
    "samplers": '''
from torch.utils.data import DataLoader, TensorDataset, SequentialSampler, RandomSampler, WeightedRandomSampler, BatchSampler
ds = TensorDataset(torch.arange(6))
seq = list(SequentialSampler(ds))
rnd = sorted(RandomSampler(ds))
w = list(WeightedRandomSampler([0., 0., 1., 0., 0., 0.], num_samples=3))
bs = list(BatchSampler(SequentialSampler(range(5)), batch_size=2, drop_last=False))
result = seq, rnd, w, bs
''',
    "dataloader_iter_next": '''
from torch.utils.data import DataLoader, TensorDataset
loader = DataLoader(TensorDataset(torch.arange(8.).reshape(4, 2), torch.tensor([0, 1, 0, 1])), batch_size=2)
dataiter = iter(loader)
images, labels = next(dataiter)
result = images, labels, len(loader.dataset), loader.batch_size
''',
    # -- training loops ----------------------------------------------------------------------
    "linear_regression_loop": '''
from torch import nn
x = torch.linspace(0, 1, 32).unsqueeze(1)
y = 2 * x + 1
model = det_init(nn.Linear(1, 1))
criterion = nn.MSELoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
for epoch in range(100):
    optimizer.zero_grad()
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()
result = model.weight, model.bias, loss
''', 
    "logistic_regression_loop": '''
from torch import nn
X = torch.cat([det_data(20, 2) + 2, det_data(20, 2, seed=3) - 2])
y = torch.cat([torch.ones(20), torch.zeros(20)]).unsqueeze(1)
model = det_init(nn.Sequential(nn.Linear(2, 1)))
opt = torch.optim.Adam(model.parameters(), lr=0.1)
loss_fn = nn.BCEWithLogitsLoss()
for _ in range(30):
    opt.zero_grad(); loss = loss_fn(model(X), y); loss.backward(); opt.step()
with torch.no_grad():
    acc = ((torch.sigmoid(model(X)) > 0.5).float() == y).float().mean()
result = loss, acc
''',
    "mnist_style_train_test_loop": '''
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
X = det_data(48, 1, 8, 8); y = (X.mean(dim=(1, 2, 3)) > 0).long() + 2 * (X[:, 0, 0, 0] > 0).long()
train_dataloader = DataLoader(TensorDataset(X[:32], y[:32]), batch_size=8)
test_dataloader = DataLoader(TensorDataset(X[32:], y[32:]), batch_size=8)
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 4, 3, 1)
        self.conv2 = nn.Conv2d(4, 8, 3, 1)
        self.fc1 = nn.Linear(8 * 2 * 2, 16)
        self.fc2 = nn.Linear(16, 4)
    def forward(self, x):
        x = torch.relu(self.conv1(x))
        x = torch.nn.functional.max_pool2d(torch.relu(self.conv2(x)), 2)
        x = torch.flatten(x, 1)
        return self.fc2(torch.relu(self.fc1(x)))
model = det_init(Net(), scale=0.2)
loss_fn = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=1e-1)
def train_loop(dataloader, model, loss_fn, optimizer):
    model.train()
    for batch, (X, y) in enumerate(dataloader):
        pred = model(X)
        loss = loss_fn(pred, y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    return loss.item()
def test_loop(dataloader, model, loss_fn):
    model.eval()
    size = len(dataloader.dataset); num_batches = len(dataloader)
    test_loss, correct = 0, 0
    with torch.no_grad():
        for X, y in dataloader:
            pred = model(X)
            test_loss += loss_fn(pred, y).item()
            correct += (pred.argmax(1) == y).type(torch.float).sum().item()
    return test_loss / num_batches, correct / size
hist = []
for t in range(3):
    hist.append(train_loop(train_dataloader, model, loss_fn, optimizer))
    hist.append(test_loop(test_dataloader, model, loss_fn))
result = hist
''', 
    "cifar_style_cnn_step": '''
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 6, 5)
        self.pool = nn.MaxPool2d(2, 2)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(16 * 5 * 5, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, 10)
    def forward(self, x):
        x = self.pool(F.relu(self.conv1(x)))
        x = self.pool(F.relu(self.conv2(x)))
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        return self.fc3(x)
net = det_init(Net(), scale=0.05)
criterion = nn.CrossEntropyLoss()
optimizer = optim.SGD(net.parameters(), lr=0.001, momentum=0.9)
inputs = det_data(4, 3, 32, 32); labels = torch.tensor([1, 3, 5, 7])
running_loss = 0.0
for i in range(2):
    optimizer.zero_grad()
    outputs = net(inputs)
    loss = criterion(outputs, labels)
    loss.backward()
    optimizer.step()
    running_loss += loss.item()
_, predicted = torch.max(outputs, 1)
result = running_loss, predicted, net.conv1.weight.grad.abs().sum()
''',
    "nn_tutorial_from_scratch": '''
import math
x_train = det_data(16, 10); y_train = torch.tensor([i % 3 for i in range(16)])
weights = torch.from_numpy(np.linspace(-1, 1, 30).reshape(10, 3).astype(np.float32)) / math.sqrt(10)
weights.requires_grad_()
bias = torch.zeros(3, requires_grad=True)
def log_softmax(x):
    return x - x.exp().sum(-1).log().unsqueeze(-1)
def model(xb):
    return log_softmax(xb @ weights + bias)
def nll(input, target):
    return -input[range(target.shape[0]), target].mean()
def accuracy(out, yb):
    preds = torch.argmax(out, dim=1)
    return (preds == yb).float().mean()
lr = 0.5
for epoch in range(2):
    for i in range(4):
        xb = x_train[i * 4: i * 4 + 4]; yb = y_train[i * 4: i * 4 + 4]
        loss = nll(model(xb), yb)
        loss.backward()
        with torch.no_grad():
            weights -= weights.grad * lr
            bias -= bias.grad * lr
            weights.grad.zero_()
            bias.grad.zero_()
result = nll(model(x_train), y_train), accuracy(model(x_train), y_train), weights
''',
    "nn_tutorial_refactored": '''
from torch import nn, optim
import torch.nn.functional as F
from torch.utils.data import TensorDataset, DataLoader
x_train = det_data(16, 10); y_train = torch.tensor([i % 3 for i in range(16)])
class Mnist_Logistic(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(10, 3)
    def forward(self, xb):
        return self.lin(xb)
def get_model():
    model = det_init(Mnist_Logistic())
    return model, optim.SGD(model.parameters(), lr=0.5)
loss_func = F.cross_entropy
def loss_batch(model, loss_func, xb, yb, opt=None):
    loss = loss_func(model(xb), yb)
    if opt is not None:
        loss.backward(); opt.step(); opt.zero_grad()
    return loss.item(), len(xb)
model, opt = get_model()
train_dl = DataLoader(TensorDataset(x_train, y_train), batch_size=4)
valid_dl = DataLoader(TensorDataset(x_train, y_train), batch_size=8)
for epoch in range(2):
    model.train()
    for xb, yb in train_dl:
        loss_batch(model, loss_func, xb, yb, opt)
    model.eval()
    with torch.no_grad():
        losses, nums = zip(*[loss_batch(model, loss_func, xb, yb) for xb, yb in valid_dl])
    val_loss = np.sum(np.multiply(losses, nums)) / np.sum(nums)
result = float(val_loss), model.lin.weight
''',
    "lambda_layer_sequential": '''
from torch import nn
import torch.nn.functional as F
class Lambda(nn.Module):
    def __init__(self, func):
        super().__init__()
        self.func = func
    def forward(self, x):
        return self.func(x)
model = nn.Sequential(Lambda(lambda x: x.view(-1, 1, 6, 6)), nn.Conv2d(1, 4, 3, stride=2, padding=1), nn.ReLU(), nn.AvgPool2d(3), Lambda(lambda x: x.view(x.size(0), -1)))
det_init(model)
result = model(det_data(2, 36))
''',
    "regression_mlp_relu_tanh": '''
from torch import nn
X = torch.linspace(-2, 2, 40).unsqueeze(1)
y = torch.sin(X) + 0.1 * X ** 2
model = det_init(nn.Sequential(nn.Linear(1, 16), nn.Tanh(), nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 1)))
opt = torch.optim.Adam(model.parameters(), lr=0.01)
for _ in range(40):
    opt.zero_grad(); loss = nn.functional.mse_loss(model(X), y); loss.backward(); opt.step()
result = loss
''',
    "multiclass_softmax_classifier": '''
from torch import nn
X = det_data(30, 4); y = (X[:, 0] > 0).long() + (X[:, 1] > 0).long()
model = det_init(nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Dropout(0.0), nn.Linear(8, 3)))
opt = torch.optim.SGD(model.parameters(), lr=0.2, momentum=0.9)
for _ in range(20):
    opt.zero_grad(); loss = nn.CrossEntropyLoss()(model(X), y); loss.backward(); opt.step()
model.eval()
with torch.no_grad():
    probs = torch.softmax(model(X), dim=1)
    preds = probs.argmax(dim=1)
result = loss, (preds == y).sum().item(), probs[:3]
''',
    # -- text: RNN / LSTM / GRU --------------------------------------------------------------
    "char_rnn_classification": '''
from torch import nn
import string
all_letters = string.ascii_letters + " .,;'"
n_letters = len(all_letters)
def lineToTensor(line):
    tensor = torch.zeros(len(line), 1, n_letters)
    for li, letter in enumerate(line):
        tensor[li][0][all_letters.find(letter)] = 1
    return tensor
class CharRNN(nn.Module):
    def __init__(self, input_size, hidden_size, output_size):
        super().__init__()
        self.rnn = nn.RNN(input_size, hidden_size)
        self.h2o = nn.Linear(hidden_size, output_size)
        self.softmax = nn.LogSoftmax(dim=1)
    def forward(self, line_tensor):
        rnn_out, hidden = self.rnn(line_tensor)
        output = self.h2o(hidden[0])
        return self.softmax(output)
rnn = det_init(CharRNN(n_letters, 16, 4), scale=0.2)
out = rnn(lineToTensor('Albert'))
loss = nn.NLLLoss()(out, torch.tensor([2]))
loss.backward()
result = out, loss, rnn.rnn.weight_hh_l0.grad.abs().sum(), lineToTensor('Jones').size()
''',
    "rnn_manual_cell_loop": '''
from torch import nn
class RNN(nn.Module):
    def __init__(self, input_size, hidden_size, output_size):
        super().__init__()
        self.hidden_size = hidden_size
        self.i2h = nn.Linear(input_size, hidden_size)
        self.h2h = nn.Linear(hidden_size, hidden_size)
        self.h2o = nn.Linear(hidden_size, output_size)
        self.softmax = nn.LogSoftmax(dim=1)
    def forward(self, input, hidden):
        hidden = torch.tanh(self.i2h(input) + self.h2h(hidden))
        return self.softmax(self.h2o(hidden)), hidden
    def initHidden(self):
        return torch.zeros(1, self.hidden_size)
rnn = det_init(RNN(5, 8, 3))
hidden = rnn.initHidden()
x = det_data(4, 1, 5)
for i in range(x.size()[0]):
    output, hidden = rnn(x[i], hidden)
result = output, hidden
''',
    "lstm_text_classifier": '''
from torch import nn
class LSTMClassifier(nn.Module):
    def __init__(self, vocab_size, embed_dim, hidden_dim, num_class):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embed_dim, padding_idx=0)
        self.lstm = nn.LSTM(embed_dim, hidden_dim, batch_first=True)
        self.fc = nn.Linear(hidden_dim, num_class)
    def forward(self, text):
        embedded = self.embedding(text)
        output, (hidden, cell) = self.lstm(embedded)
        return self.fc(hidden[-1])
model = det_init(LSTMClassifier(30, 8, 12, 3), scale=0.2)
text = torch.tensor([[4, 9, 2, 7, 0], [1, 3, 3, 8, 5]])
label = torch.tensor([2, 0])
optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
for _ in range(3):
    optimizer.zero_grad()
    loss = nn.functional.cross_entropy(model(text), label)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
    optimizer.step()
result = loss, model(text)
''', 
    "lstm_stacked_bidirectional": '''
from torch import nn
lstm = det_init(nn.LSTM(input_size=4, hidden_size=5, num_layers=2, bidirectional=True), scale=0.3)
x = det_data(6, 3, 4)
h0 = torch.zeros(2 * 2, 3, 5); c0 = torch.zeros(2 * 2, 3, 5) + 0.1
output, (hn, cn) = lstm(x, (h0, c0))
output.sum().backward()
result = output, hn, cn, lstm.weight_ih_l1_reverse.grad
''',
    "gru_batch_first": '''
from torch import nn
gru = det_init(nn.GRU(3, 4, num_layers=2, batch_first=True), scale=0.3)
x = det_data(2, 5, 3)
out, h = gru(x)
out2, h2 = gru(x, h)
result = out, h, out2[:, -1]
''',
    "lstm_cell_generation": '''
from torch import nn
vocab = 12
emb = det_init(nn.Embedding(vocab, 6))
cell = det_init(nn.LSTMCell(6, 8), scale=0.3)
head = det_init(nn.Linear(8, vocab))
h = torch.zeros(1, 8); c = torch.zeros(1, 8)
tok = torch.tensor([3])
generated = []
with torch.no_grad():
    for _ in range(8):
        h, c = cell(emb(tok), (h, c))
        logits = head(h)
        tok = logits.argmax(dim=-1)
        generated.append(tok.item())
torch.manual_seed(0)
probs = torch.softmax(logits / 0.8, dim=-1)
sampled = torch.multinomial(probs, num_samples=5, replacement=True)
result = generated, sampled.shape, sampled.dtype, bool(((sampled >= 0) & (sampled < vocab)).all())
''',
    "gru_rnn_cells": '''
from torch import nn
gc = det_init(nn.GRUCell(3, 4)); rc = det_init(nn.RNNCell(3, 4, nonlinearity='relu'))
x = det_data(5, 2, 3)
h1 = torch.zeros(2, 4); h2 = torch.zeros(2, 4)
for t in range(5):
    h1 = gc(x[t], h1); h2 = rc(x[t], h2)
result = h1, h2, rc(x[0]).shape
''',
    "char_lm_training_step": '''
from torch import nn
text = "hello world, hello tracing"
chars = sorted(set(text)); stoi = {ch: i for i, ch in enumerate(chars)}
data = torch.tensor([stoi[c] for c in text], dtype=torch.long)
block = 8
ix = torch.arange(0, len(data) - block - 1, 4)
xb = torch.stack([data[i:i + block] for i in ix]); yb = torch.stack([data[i + 1:i + block + 1] for i in ix])
class LM(nn.Module):
    def __init__(self, V):
        super().__init__()
        self.emb = nn.Embedding(V, 8); self.rnn = nn.LSTM(8, 16, batch_first=True); self.out = nn.Linear(16, V)
    def forward(self, x, state=None):
        h, state = self.rnn(self.emb(x), state)
        return self.out(h), state
model = det_init(LM(len(chars)), scale=0.2)
opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
for _ in range(3):
    logits, _ = model(xb)
    loss = nn.functional.cross_entropy(logits.view(-1, logits.size(-1)), yb.view(-1))
    opt.zero_grad(set_to_none=True); loss.backward(); opt.step()
result = loss, xb.shape
''',
    # -- transformer tutorial ----------------------------------------------------------------
    "positional_encoding": '''
import math
from torch import nn
class PositionalEncoding(nn.Module):
    def __init__(self, d_model, dropout=0.1, max_len=50):
        super().__init__()
        self.dropout = nn.Dropout(p=dropout)
        position = torch.arange(max_len).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
        pe = torch.zeros(max_len, 1, d_model)
        pe[:, 0, 0::2] = torch.sin(position * div_term)
        pe[:, 0, 1::2] = torch.cos(position * div_term)
        self.register_buffer('pe', pe)
    def forward(self, x):
        x = x + self.pe[:x.size(0)]
        return self.dropout(x)
pe = PositionalEncoding(8).eval()
result = pe(torch.zeros(5, 2, 8)), list(pe.state_dict().keys())
''',
    "transformer_encoder_causal": '''
from torch import nn
mask = nn.Transformer.generate_square_subsequent_mask(5)
layer = nn.TransformerEncoderLayer(d_model=8, nhead=2, dim_feedforward=16, dropout=0.0)
enc = det_init(nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False), scale=0.2)
src = det_data(5, 3, 8)
out = enc(src, mask=mask)
result = mask, out
''',
    "transformer_encoder_batch_first_padding": '''
from torch import nn
layer = det_init(nn.TransformerEncoderLayer(d_model=8, nhead=2, dim_feedforward=16, dropout=0.0, batch_first=True, norm_first=True, activation='gelu'), scale=0.2)
src = det_data(2, 4, 8)
pad = torch.tensor([[False, False, True, True], [False, False, False, False]])
out = layer(src, src_key_padding_mask=pad)
result = out[:, :2], out[1]
''',
    "multihead_attention": '''
from torch import nn
mha = det_init(nn.MultiheadAttention(embed_dim=8, num_heads=2, batch_first=True), scale=0.2)
q = det_data(2, 3, 8); kv = det_data(2, 4, 8, seed=2)
attn_output, attn_weights = mha(q, kv, kv, key_padding_mask=torch.tensor([[False, False, False, True], [False] * 4]))
o2, w2 = mha(q, q, q, need_weights=True, average_attn_weights=False, attn_mask=torch.triu(torch.ones(3, 3, dtype=torch.bool), 1))
o3, w3 = mha(q, q, q, need_weights=False)
result = attn_output, attn_weights, o2, w2.shape, w3
''',
    "scaled_dot_product_attention": '''
import torch.nn.functional as F
q = det_data(2, 2, 4, 8); k = det_data(2, 2, 4, 8, seed=2); v = det_data(2, 2, 4, 8, seed=3)
result = F.scaled_dot_product_attention(q, k, v), F.scaled_dot_product_attention(q, k, v, is_causal=True), F.scaled_dot_product_attention(q, k, v, attn_mask=torch.ones(4, 4, dtype=torch.bool).tril())
''',
    "attention_from_scratch": '''
import math
from torch import nn
class Head(nn.Module):
    def __init__(self, n_embd, head_size, block_size):
        super().__init__()
        self.key = nn.Linear(n_embd, head_size, bias=False)
        self.query = nn.Linear(n_embd, head_size, bias=False)
        self.value = nn.Linear(n_embd, head_size, bias=False)
        self.register_buffer('tril', torch.tril(torch.ones(block_size, block_size)))
    def forward(self, x):
        B, T, C = x.shape
        k = self.key(x); q = self.query(x)
        wei = q @ k.transpose(-2, -1) * k.shape[-1] ** -0.5
        wei = wei.masked_fill(self.tril[:T, :T] == 0, float('-inf'))
        wei = nn.functional.softmax(wei, dim=-1)
        return wei @ self.value(x)
head = det_init(Head(8, 4, 6))
x = det_data(2, 5, 8).requires_grad_()
out = head(x)
out.sum().backward()
result = out, x.grad
''',
    # -- functional API ----------------------------------------------------------------------
    "functional_activations": '''
import torch.nn.functional as F
x = torch.linspace(-2, 2, 5)
result = F.relu(x), F.leaky_relu(x, 0.1), F.gelu(x), F.silu(x), F.elu(x), F.softplus(x, beta=2), F.hardtanh(x), F.relu6(x * 4), F.sigmoid(x), F.tanh(x), F.glu(torch.arange(4.)), F.log_softmax(x, 0), F.softmin(x, 0), F.mish(x), F.hardswish(x), F.logsigmoid(x)
''',
    "functional_one_hot_pad": '''
import torch.nn.functional as F
result = F.one_hot(torch.tensor([0, 2, 1]), num_classes=4), F.one_hot(torch.tensor([[1], [0]])), F.pad(torch.ones(2, 2), (1, 1)), F.pad(torch.ones(1, 2, 2), (1, 0, 0, 2), value=5.), F.pad(torch.arange(4.).view(1, 1, 4), (2, 1), mode='reflect'), F.pad(torch.arange(4.).view(1, 1, 4), (1, 2), mode='replicate')
''',
    "functional_interpolate": '''
import torch.nn.functional as F
from torch import nn
x = torch.arange(16.).view(1, 1, 4, 4)
result = F.interpolate(x, scale_factor=2, mode='nearest'), F.interpolate(x, size=(3, 5), mode='bilinear', align_corners=False), F.interpolate(x, scale_factor=0.5, mode='bilinear', align_corners=True), nn.Upsample(scale_factor=2)(x).shape
''',
    "functional_conv_pool_linear": '''
import torch.nn.functional as F
x = det_data(1, 2, 5, 5); w = det_data(3, 2, 3, 3, seed=2); b = torch.tensor([0.1, 0.2, 0.3])
result = F.conv2d(x, w, b, padding=1), F.max_pool2d(x, 2), F.avg_pool2d(x, 3, stride=1), F.linear(x.view(1, -1), det_data(4, 50, seed=3)), F.adaptive_avg_pool2d(x, (2, 2)), F.conv1d(x[:, :, 0], det_data(4, 2, 2, seed=4), stride=2), F.conv_transpose2d(x, det_data(2, 3, 2, 2, seed=5), stride=2)
''',
    "functional_losses": '''
import torch.nn.functional as F
a = det_data(4, 3); b = det_data(4, 3, seed=2); t = torch.tensor([0, 2, 1, 2])
result = F.mse_loss(a, b), F.l1_loss(a, b, reduction='sum'), F.cross_entropy(a, t), F.nll_loss(F.log_softmax(a, 1), t), F.binary_cross_entropy(torch.sigmoid(a), (b > 0).float()), F.binary_cross_entropy_with_logits(a, (b > 0).float(), pos_weight=torch.tensor([2., 1., 1.])), F.smooth_l1_loss(a, b), F.huber_loss(a, b), F.kl_div(F.log_softmax(a, 1), F.softmax(b, 1), reduction='batchmean')
''',
    "functional_embedding_norms_dropout": '''
import torch.nn.functional as F
w = det_data(10, 3)
x = det_data(2, 3, 4)
result = F.embedding(torch.tensor([[1, 2], [4, 9]]), w), F.layer_norm(x, (4,)), F.group_norm(x, 1), F.batch_norm(x, torch.zeros(3), torch.ones(3), training=False), F.dropout(x, p=0.3, training=False), F.normalize(x, p=2, dim=-1), F.instance_norm(x)
''',
    "functional_unfold_pixel_shuffle": '''
import torch.nn.functional as F
x = torch.arange(32.).view(1, 8, 2, 2)
result = F.pixel_shuffle(x, 2), F.unfold(torch.arange(16.).view(1, 1, 4, 4), kernel_size=2), F.fold(F.unfold(torch.arange(16.).view(1, 1, 4, 4), 2), (4, 4), 2)
''',
    "gumbel_softmax_shapes": '''
import torch.nn.functional as F
torch.manual_seed(0)
logits = det_data(3, 5)
y = F.gumbel_softmax(logits, tau=1, hard=True)
result = y.shape, y.sum(dim=-1), sorted(set(y.flatten().tolist()))
''',
    # -- linalg, distributions, random -------------------------------------------------------
    "linalg_basics": '''
A = torch.tensor([[4., 1.], [2., 3.]]); b = torch.tensor([1., 2.])
result = torch.linalg.inv(A), torch.linalg.det(A), torch.linalg.solve(A, b), torch.inverse(A), torch.det(A), torch.linalg.norm(A, 'fro'), torch.linalg.matrix_power(A, 3) if hasattr(torch.linalg, 'matrix_power') else None, torch.matrix_exp(torch.zeros(2, 2))
''',
    "linalg_decompositions": '''
A = torch.tensor([[4., 1.], [1., 3.]])
L = torch.linalg.cholesky(A)
Q, R = torch.linalg.qr(A)
evals = torch.linalg.eigvalsh(A)
S = torch.linalg.svdvals(A)
result = L, torch.allclose(Q @ R, A, atol=1e-6), evals, S, torch.linalg.matrix_rank(A), torch.linalg.pinv(A)
''',
    "distributions_normal_categorical": '''
from torch.distributions import Normal, Categorical
n = Normal(torch.tensor([0., 1.]), torch.tensor([1., 2.]))
c = Categorical(logits=torch.tensor([0.5, 1.0, -1.0]))
c2 = Categorical(probs=torch.tensor([0.2, 0.3, 0.5]))
torch.manual_seed(0)
s = c.sample((4,))
mu = torch.tensor([0.5], requires_grad=True)
r = Normal(mu, 1.0).rsample((3,))
r.sum().backward()
result = n.log_prob(torch.tensor([0.5, 0.5])), n.entropy(), n.mean, n.stddev, c.probs, c.log_prob(torch.tensor([0, 2])), c.entropy(), c2.logits, s.shape, s.dtype, mu.grad, n.sample().shape
''',
    "distributions_more": '''
from torch.distributions import Bernoulli, Uniform, MultivariateNormal, kl_divergence, Normal
b = Bernoulli(probs=torch.tensor([0.3, 0.9]))
u = Uniform(0., 2.)
mvn = MultivariateNormal(torch.zeros(2), covariance_matrix=torch.eye(2))
result = b.log_prob(torch.tensor([1., 0.])), b.entropy(), u.log_prob(torch.tensor(1.)), mvn.log_prob(torch.tensor([0.5, -0.5])), kl_divergence(Normal(0., 1.), Normal(1., 2.))
''',
    "generator_rng_state": '''
g = torch.Generator().manual_seed(123)
a = torch.randn(3, generator=g)
g2 = torch.Generator(); g2.manual_seed(123)
b = torch.randn(3, generator=g2)
state = torch.get_rng_state()
x = torch.rand(4)
torch.set_rng_state(state)
y = torch.rand(4)
result = torch.equal(a, b), torch.equal(x, y), g.initial_seed(), torch.initial_seed() >= 0
''',
    "multinomial_bernoulli_normal": '''
torch.manual_seed(0)
m = torch.multinomial(torch.tensor([0., 10., 3., 0.]), 2)
bern = torch.bernoulli(torch.full((1000,), 0.3))
nrm = torch.normal(mean=torch.zeros(3), std=torch.ones(3))
u = torch.empty(1000).uniform_(-1, 1)
e = torch.empty(5).normal_(0, 0.1)
result = sorted(m.tolist()), bern.dtype, abs(bern.mean().item() - 0.3) < 0.05, nrm.shape, bool((u.abs() <= 1).all()), e.shape, torch.randn(2, 3).exponential_().shape
''',
    # -- more tutorial surface: hooks, compile, EmbeddingBag, schedulers, data ----------------
    "forward_hooks_feature_extraction": '''
from torch import nn
model = det_init(nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2)))
activation = {}
def get_activation(name):
    def hook(model, input, output):
        activation[name] = output.detach()
    return hook
h = model[1].register_forward_hook(get_activation('relu'))
pre = model[2].register_forward_pre_hook(lambda m, args: (args[0] * 2,))
out = model(det_data(2, 3))
h.remove(); pre.remove()
out2 = model(det_data(2, 3))
result = activation['relu'], out, out2
''',
    "full_backward_hook": '''
from torch import nn
model = det_init(nn.Linear(3, 2))
grads = []
model.register_full_backward_hook(lambda m, grad_input, grad_output: grads.append((grad_input[0].clone(), grad_output[0].clone())))
x = det_data(4, 3).requires_grad_()
model(x).pow(2).sum().backward()
result = grads
''',
    "torch_compile_model": '''
from torch import nn
model = det_init(nn.Sequential(nn.Linear(3, 8), nn.GELU(), nn.Linear(8, 1)))
compiled = torch.compile(model)
x = det_data(5, 3)
y = compiled(x)
y.sum().backward()
result = y, model[0].weight.grad
''',
    "embedding_bag_text_classification": '''
from torch import nn
class TextClassificationModel(nn.Module):
    def __init__(self, vocab_size, embed_dim, num_class):
        super().__init__()
        self.embedding = nn.EmbeddingBag(vocab_size, embed_dim, sparse=False)
        self.fc = nn.Linear(embed_dim, num_class)
        self.init_weights()
    def init_weights(self):
        initrange = 0.5
        self.embedding.weight.data.uniform_(-initrange, initrange)
        self.fc.weight.data.uniform_(-initrange, initrange)
        self.fc.bias.data.zero_()
    def forward(self, text, offsets):
        embedded = self.embedding(text, offsets)
        return self.fc(embedded)
model = det_init(TextClassificationModel(20, 6, 3))
text = torch.tensor([1, 4, 7, 2, 9, 9, 3, 11, 5])
offsets = torch.tensor([0, 3, 4])
out = model(text, offsets)
nn.CrossEntropyLoss()(out, torch.tensor([0, 2, 1])).backward()
bag_max = nn.EmbeddingBag(20, 6, mode='max')
det_init(bag_max)
result = out, model.embedding.weight.grad, bag_max(torch.tensor([[1, 2], [3, 4]]))
''',
    "sequential_lr_and_chained": '''
from torch import nn
opt = torch.optim.SGD(nn.Linear(1, 1).parameters(), lr=0.1)
warm = torch.optim.lr_scheduler.LinearLR(opt, start_factor=0.1, total_iters=3)
decay = torch.optim.lr_scheduler.ExponentialLR(opt, gamma=0.5)
sched = torch.optim.lr_scheduler.SequentialLR(opt, schedulers=[warm, decay], milestones=[3])
lrs = []
for _ in range(6):
    opt.step(); sched.step(); lrs.append(round(opt.param_groups[0]['lr'], 10))
result = lrs
''',
    "concat_dataset_and_iterable": '''
from torch.utils.data import ConcatDataset, TensorDataset, DataLoader, IterableDataset
a = TensorDataset(torch.arange(3)); b = TensorDataset(torch.arange(10, 12))
cat = ConcatDataset([a, b])
class Stream(IterableDataset):
    def __iter__(self):
        return iter(range(5))
result = len(cat), cat[3], [x for (x,) in DataLoader(cat, batch_size=2)], list(DataLoader(Stream(), batch_size=2))
''',
    "scatter_reduce_index_ops": '''
src = torch.tensor([1., 2., 3., 4., 5., 6.])
index = torch.tensor([0, 1, 0, 1, 2, 1])
x = torch.zeros(4, 3)
x.index_fill_(1, torch.tensor([0, 2]), -1.)
y = torch.zeros(5, 3).index_copy_(0, torch.tensor([0, 4, 2]), torch.ones(3, 3))
result = torch.zeros(3).scatter_reduce(0, index, src, reduce="sum"), torch.zeros(3).scatter_reduce(0, index, src, reduce="amax", include_self=False), x, y, torch.take(src, torch.tensor([0, 5]))
''',
    "lbfgs_closure": '''
from torch import nn
model = det_init(nn.Linear(2, 1))
x = det_data(10, 2); y = x @ torch.tensor([[1.5], [-2.0]]) + 0.5
opt = torch.optim.LBFGS(model.parameters(), lr=1, max_iter=20)
def closure():
    opt.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    return loss
for _ in range(3):
    opt.step(closure)
result = model.weight, model.bias
''', 
    "spatial_transformer_grid_sample": '''
import torch.nn.functional as F
theta = torch.tensor([[[0.9, 0.1, 0.05], [-0.1, 0.8, 0.0]]])
grid = F.affine_grid(theta, [1, 1, 4, 4], align_corners=False)
img = torch.arange(16.).view(1, 1, 4, 4)
result = grid, F.grid_sample(img, grid, align_corners=False)
''',
    "seq2seq_transformer": '''
from torch import nn
model = nn.Transformer(d_model=8, nhead=2, num_encoder_layers=1, num_decoder_layers=1, dim_feedforward=16, dropout=0.0, batch_first=True)
det_init(model, scale=0.2)
src = det_data(2, 5, 8); tgt = det_data(2, 4, 8, seed=2)
tgt_mask = nn.Transformer.generate_square_subsequent_mask(4)
result = model(src, tgt, tgt_mask=tgt_mask)
''',
    "anomaly_and_profiler": '''
x = torch.tensor([1., 2.], requires_grad=True)
with torch.autograd.detect_anomaly():
    y = (x * 2).sum()
    y.backward()
with torch.autograd.profiler.profile() as prof:
    z = (x * 3).sum()
result = x.grad, isinstance(prof.key_averages().table(sort_by="self_cpu_time_total"), str)
''',
    "module_half_to_and_buffers_dtype": '''
from torch import nn
m = nn.Sequential(nn.Linear(2, 2), nn.BatchNorm1d(2))
m.half()
dtypes = [p.dtype for p in m.parameters()] + [b.dtype for b in m.buffers()]
m.to(torch.float64)
result = dtypes, [b.dtype for b in m.buffers()], m[1].num_batches_tracked.dtype
''',
    # -- excluded: torch.fft (torch.jit's trace and torch.backends's flags, now in) ---------------
    "jit_script": '''
f = torch.jit.trace(torch.nn.Linear(2, 2), torch.ones(1, 2))
result = f(torch.ones(1, 2)).shape
''',
    "fft_rfft": '''
result = torch.fft.rfft(torch.tensor([1., 2., 3., 4.])).abs()
''',
    "backends_flags": '''
torch.backends.cudnn.benchmark = True
result = torch.backends.mps.is_available()
''',
}

TOL = {"mnist_style_train_test_loop": dict(rtol=1e-3, atol=1e-4), "linear_regression_loop": dict(rtol=1e-3, atol=1e-4),
       "logistic_regression_loop": dict(rtol=1e-3, atol=1e-4), "regression_mlp_relu_tanh": dict(rtol=1e-3, atol=1e-4),
       "multiclass_softmax_classifier": dict(rtol=1e-3, atol=1e-4), "lstm_text_classifier": dict(rtol=1e-3, atol=1e-4),
       "char_lm_training_step": dict(rtol=1e-3, atol=1e-4), "cifar_style_cnn_step": dict(rtol=1e-3, atol=1e-4),
       "nn_tutorial_refactored": dict(rtol=1e-3, atol=1e-4), "nn_tutorial_from_scratch": dict(rtol=1e-3, atol=1e-4)}
DEFAULT_TOL = dict(rtol=1e-4, atol=1e-5)
NAMES = sorted(PROBES)


def source_for(lib_name, code):
    """The probe's text as a user of `lib_name` runs it: only the library's name changes."""
    text = PRELUDE + textwrap.dedent(code)
    return text if lib_name == "torch" else re.sub(r"\btorch\b", lib_name, text)


def run_probe(lib_name, name, tmp):
    ns = {"TMP": str(tmp), "__name__": "__probe__"}
    exec(compile(source_for(lib_name, PROBES[name]), f"<probe {name}>", "exec"), ns)
    return plain(ns["result"])


def plain(x):
    """A library-neutral form of a probe's result: tensors become (dtype name, array)."""
    if hasattr(x, "detach") and hasattr(x, "numpy") and hasattr(x, "dtype"):
        return ("tensor", str(x.dtype).split(".")[-1], np.array(x.detach().cpu().numpy(), copy=True))
    if isinstance(x, np.ndarray):
        return ("ndarray", str(x.dtype), x.copy())
    if isinstance(x, np.generic):
        return plain(x.item())
    if isinstance(x, dict):
        return {"dict": [(plain(k), plain(v)) for k, v in x.items()]}
    if isinstance(x, (list, tuple)):  # Size, namedtuples (values, indices) and lists alike
        return [plain(v) for v in x]
    if isinstance(x, (bool, int, float, str, type(None))):
        return x.replace("tracegrad", "torch") if isinstance(x, str) else x
    if type(x).__name__ in ("dtype", "device"):
        return ("obj", str(x).replace("tracegrad", "torch"))
    raise TypeError(f"probe result of type {type(x).__name__} has no comparison")


def assert_same(got, want, tol, where="result"):
    if isinstance(want, tuple) and want[0] in ("tensor", "ndarray"):
        assert isinstance(got, tuple) and got[0] == want[0], f"{where}: {got!r:.200} is not a {want[0]}"
        assert got[1] == want[1], f"{where}: dtype {got[1]} != {want[1]}"
        assert got[2].shape == want[2].shape, f"{where}: shape {got[2].shape} != {want[2].shape}"
        if want[2].dtype.kind in "fc":
            np.testing.assert_allclose(got[2], want[2], equal_nan=True, err_msg=where, **tol)
        else:
            np.testing.assert_array_equal(got[2], want[2], err_msg=where)
    elif isinstance(want, dict):
        assert isinstance(got, dict) and len(got["dict"]) == len(want["dict"]), f"{where}: {got!r:.200} != {want!r:.200}"
        for i, ((gk, gv), (wk, wv)) in enumerate(zip(got["dict"], want["dict"])):
            assert_same(gk, wk, tol, f"{where} key {i}")
            assert_same(gv, wv, tol, f"{where}[{wk!r}]")
    elif isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want), f"{where}: {got!r:.200} != {want!r:.200}"
        for i, (g, w) in enumerate(zip(got, want)):
            assert_same(g, w, tol, f"{where}[{i}]")
    elif isinstance(want, float):
        assert type(got) is float, f"{where}: {got!r} is not a float"
        np.testing.assert_allclose(got, want, err_msg=where, equal_nan=True, **tol)
    else:
        assert type(got) is type(want) and got == want, f"{where}: {got!r} != {want!r}"


@lru_cache(maxsize=None)
def torch_outcome(name, tmp):
    try:
        return True, run_probe("torch", name, tmp)
    except Exception:
        return False, traceback.format_exc()


@pytest.fixture(scope="module")
def tmp(tmp_path_factory):
    return tmp_path_factory.mktemp("survey")


@pytest.fixture(autouse=True)
def restore_state():
    yield
    for lib in (real_torch, tracegrad):
        lib.set_grad_enabled(True)
        lib.set_printoptions(profile="default")


@pytest.mark.parametrize("name", NAMES)
def test_torch_runs_probe(name, tmp):
    ok, detail = torch_outcome(name, tmp)
    if not ok:
        pytest.xfail(f"torch fails this probe:\n{detail}")


@pytest.mark.parametrize("name", NAMES)
def test_tracegrad_matches_torch(name, tmp):
    if name in EXCLUDED:
        pytest.skip("torch.fft is outside tracegrad")
    ok, want = torch_outcome(name, tmp)
    if not ok:
        pytest.skip("torch fails this probe")
    got = run_probe("tracegrad", name, tmp)
    assert_same(got, want, TOL.get(name, DEFAULT_TOL))


def survey(tmp):
    """(probes, torch passes, tracegrad passes, {failed probe: reason})."""
    t = p = 0
    failed = {}
    for name in NAMES:
        ok, want = torch_outcome(name, tmp)
        t += ok
        if name in EXCLUDED:
            failed[name] = "excluded"
            continue
        try:
            got = run_probe("tracegrad", name, tmp)
            if ok:
                assert_same(got, want, TOL.get(name, DEFAULT_TOL))
            p += 1
        except Exception as e:
            failed[name] = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:300]
        finally:
            for lib in (real_torch, tracegrad):
                lib.set_grad_enabled(True)
                lib.set_printoptions(profile="default")
    return len(NAMES), t, p, failed


if __name__ == "__main__":
    import tempfile
    n, t, p, failed = survey(tempfile.mkdtemp())
    print(f"probes {n}, torch passes {t}, tracegrad passes {p}")
    for k, v in failed.items():
        print(f"  {k}: {v}")
