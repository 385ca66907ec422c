"""Examples from PyTorch's autograd tutorials and the torch.autograd docs, run unchanged
under `import tracegrad as torch`: they must print what torch prints. Random inputs are
replaced by fixed data (the two libraries' generators differ); nothing else changes."""
import contextlib
import io
import re

import numpy as np
import pytest
import torch as real_torch

import tracegrad

EXAMPLES = {
    "autogradqs_basics": '''
x = torch.ones(5)  # input tensor
y = torch.zeros(3)  # expected output
w = torch.tensor(W, requires_grad=True)
b = torch.tensor(B, requires_grad=True)
z = torch.matmul(x, w)+b
loss = torch.nn.functional.binary_cross_entropy_with_logits(z, y)
print(f"Gradient function for z = {z.grad_fn}")
print(f"Gradient function for loss = {loss.grad_fn}")
loss.backward()
print(w.grad)
print(b.grad)
z = torch.matmul(x, w)+b
print(z.requires_grad)
with torch.no_grad():
    z = torch.matmul(x, w)+b
print(z.requires_grad)
z = torch.matmul(x, w)+b
z_det = z.detach()
print(z_det.requires_grad)
''',
    "autogradqs_jacobian_product": '''
inp = torch.eye(4, 5, requires_grad=True)
out = (inp+1).pow(2).t()
out.backward(torch.ones_like(out), retain_graph=True)
print(f"First call\\n{inp.grad}")
out.backward(torch.ones_like(out), retain_graph=True)
print(f"\\nSecond call\\n{inp.grad}")
inp.grad.zero_()
out.backward(torch.ones_like(out), retain_graph=True)
print(f"\\nCall after zeroing gradients\\n{inp.grad}")
''',
    "blitz_differentiation": '''
a = torch.tensor([2., 3.], requires_grad=True)
b = torch.tensor([6., 4.], requires_grad=True)
Q = 3*a**3 - b**2
external_grad = torch.tensor([1., 1.])
Q.backward(gradient=external_grad)
print(9*a**2 == a.grad)
print(-2*b == b.grad)
''',
    "blitz_dag_exclusion": '''
x = torch.tensor(R55)
y = torch.tensor(R55)
z = torch.tensor(R55, requires_grad=True)
a = x + y
print(f"Does `a` require gradients?: {a.requires_grad}")
b = x + z
print(f"Does `b` require gradients?: {b.requires_grad}")
''',
    "autograd_mechanics_saved_tensors": '''
x = torch.tensor([1., 2., 3., 4., 5.], requires_grad=True)
y = x.pow(2)
print(x.equal(y.grad_fn._saved_self))  # True
print(x is y.grad_fn._saved_self)  # True
y = x.exp()
print(y.equal(y.grad_fn._saved_result))  # True
print(y is y.grad_fn._saved_result)  # False
''',
    "docs_grad_and_backward": '''
x = torch.tensor([1.5, -0.5], requires_grad=True)
y = (x ** 3).sum()
g, = torch.autograd.grad(y, x, create_graph=True)
print(g)
h, = torch.autograd.grad(g.sum(), x)
print(h)
z = x * 2
z.backward(torch.tensor([1.0, 0.1]))
print(x.grad)
print(z.grad_fn.next_functions[0][0].variable is x)
''',
    "docs_function_exp": '''
class Exp(torch.autograd.Function):
    @staticmethod
    def forward(ctx, i):
        result = i.exp()
        ctx.save_for_backward(result)
        return result

    @staticmethod
    def backward(ctx, grad_output):
        result, = ctx.saved_tensors
        return grad_output * result

input = torch.tensor([0.5, -1.0], requires_grad=True)
output = Exp.apply(input)
output.sum().backward()
print(output)
print(input.grad)
''',
    "docs_no_grad_and_modes": '''
x = torch.tensor([1.], requires_grad=True)
with torch.no_grad():
    y = x * 2
print(y.requires_grad)
@torch.no_grad()
def doubler(x):
    return x * 2
z = doubler(x)
print(z.requires_grad)
@torch.no_grad
def tripler(x):
    return x * 3
z = tripler(x)
print(z.requires_grad)
with torch.enable_grad():
    with torch.no_grad():
        pass
    y = x * 2
print(y.requires_grad)
is_train = False
with torch.set_grad_enabled(is_train):
    y = x * 2
print(y.requires_grad)
_ = torch.set_grad_enabled(True)
y = x * 2
print(y.requires_grad)
_ = torch.set_grad_enabled(False)
y = x * 2
print(y.requires_grad)
_ = torch.set_grad_enabled(True)
with torch.inference_mode():
    y = x * 2
print(y.requires_grad)
''',
    "docs_hooks": '''
v = torch.tensor([0., 0., 0.], requires_grad=True)
h = v.register_hook(lambda grad: grad * 2)  # double the gradient
v.backward(torch.tensor([1., 2., 3.]))
print(v.grad)
h.remove()  # removes the hook
a = torch.tensor([1., 2.], requires_grad=True)
b = a * 3
b.retain_grad()
(b * b).sum().backward()
print(b.grad, b.retains_grad)
''',
}


def _data():
    rng = np.random.default_rng(0)
    return {"W": rng.standard_normal((5, 3)).round(4).tolist(), "B": rng.standard_normal(3).round(4).tolist(),
            "R55": rng.random((5, 5)).round(4).tolist()}


def _run(module, code):
    ns = {"torch": module, **_data()}
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        exec(compile(code, "<example>", "exec"), ns)
    return re.sub(r" at 0x[0-9a-f]+", " at 0x...", buf.getvalue())


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_example_prints_what_torch_prints(name):
    code = EXAMPLES[name]
    if "nn.functional" in code and not hasattr(tracegrad, "nn"):
        pytest.skip("needs tracegrad.nn")
    expected = _run(real_torch, code)
    real_torch.set_grad_enabled(True)
    got = _run(tracegrad, code)
    tracegrad.set_grad_enabled(True)
    assert got == expected
