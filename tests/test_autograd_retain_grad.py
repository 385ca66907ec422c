"""retain_grad() as torch's retains_grad hook, against torch: autograd.grad fills a retained
tensor's .grad too, a node the backward does not run leaves it unset, later gradients are
added out of place, and backward(inputs=[non-leaf]) retains the input's gradient that way
(an input named twice counts once)."""
from test_autograd_parity import same


def _xy(m):
    x = m.tensor([1., 2.], requires_grad=True)
    y = x * 2
    return x, y


def test_autograd_grad_fills_retained_grads():
    def run(m):
        x, y = _xy(m)
        y.retain_grad()
        z = (y * y).sum()
        m.autograd.grad(z, x, retain_graph=True)
        first = y.grad.clone()
        m.autograd.grad(z, x)
        return first, y.grad
    same(run)


def test_autograd_grad_with_respect_to_a_retained_tensor_does_not_alias_its_grad():
    def run(m):
        x, y = _xy(m)
        y.retain_grad()
        g, = m.autograd.grad((y * y).sum(), y)
        g.mul_(5)
        return g, y.grad
    same(run)


def test_autograd_grad_create_graph_retained_grad_requires_grad():
    def run(m):
        x, y = _xy(m)
        y.retain_grad()
        m.autograd.grad((y * y).sum(), x, create_graph=True)
        return y.grad, y.grad.requires_grad, type(y.grad.grad_fn).__name__
    same(run)


def test_a_node_the_backward_does_not_run_leaves_retained_grad_unset():
    def run(m):
        x, y = _xy(m)
        w = m.tensor([1., 3.], requires_grad=True)
        y.retain_grad()
        (y * w).sum().backward(inputs=[w])
        g1 = y.grad
        m.autograd.grad((y * w).sum(), w)
        return g1, y.grad, x.grad, w.grad
    same(run)


def test_retained_grad_accumulates_out_of_place():
    def run(m):
        x, y = _xy(m)
        y.retain_grad()
        y.backward(m.ones(2), retain_graph=True)
        g = y.grad
        y.backward(m.ones(2))
        return g is y.grad, g, y.grad, g._version
    same(run)


def test_backward_inputs_non_leaf_retains_its_grad():
    def run(m):
        x, y = _xy(m)
        (y * y).sum().backward(inputs=[y], retain_graph=True)
        r = y.retains_grad
        (y * y).sum().backward()
        return r, y.grad, x.grad
    same(run)


def test_backward_inputs_non_leaf_create_graph():
    def run(m):
        x, y = _xy(m)
        (y * y).sum().backward(inputs=[y], create_graph=True)
        return y.grad, type(y.grad.grad_fn).__name__
    same(run)


def test_backward_inputs_named_twice_count_once():
    def leaf(m):
        x, y = _xy(m)
        (x * x).sum().backward(inputs=[x, x])
        return x.grad

    def non_leaf(m):
        x, y = _xy(m)
        (y * y).sum().backward(inputs=[y, y])
        return y.grad
    same(leaf)
    same(non_leaf)


def test_create_graph_backward_warns_of_the_cycle_once_a_process():
    import subprocess
    import sys
    code = ("import warnings, sys\nwarnings.simplefilter('always')\nimport {m} as m\n"
            "x = m.tensor([1.], requires_grad=True)\ny = x * 2\n"
            "with warnings.catch_warnings(record=True) as w:\n"
            "    warnings.simplefilter('always')\n"
            "    (y * y).sum().backward(inputs=[y], create_graph=True)\n"
            "    (x * x).sum().backward(create_graph=True)\n"
            "    (x * x).sum().backward(create_graph=True)\n"
            "print(sum('reference cycle' in str(v.message) for v in w))\n")
    counts = [subprocess.run([sys.executable, "-c", code.format(m=m)], capture_output=True, text=True,
                             check=True).stdout.split()[-1] for m in ("torch", "tracegrad")]
    assert counts == ["1", "1"], counts
