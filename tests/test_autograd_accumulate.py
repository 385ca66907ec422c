"""How backward accumulates into a leaf's .grad, against torch's AccumulateGrad: with
create_graph the first gradient is a copy (never the caller's seed tensor), named
CopyBackwards; without it later gradients are added in place, also into a .grad that
requires grad (the same object keeps its history and its version moves)."""
from test_autograd_parity import same


def test_create_graph_seed_is_copied_not_aliased():
    def run(m):
        x = m.ones(2, requires_grad=True)
        s = m.ones(2, requires_grad=True)
        x.backward(s, create_graph=True)
        first = [x.grad is s, type(x.grad.grad_fn).__name__, x.grad._version]
        x.backward(s * 1)
        return first, s, x.grad, x.grad.requires_grad
    same(run)


def test_plain_backward_adds_in_place_into_a_grad_with_history():
    def run(m):
        x = m.ones(2, requires_grad=True)
        (x * x).sum().backward(create_graph=True)
        g = x.grad
        (x * 3).sum().backward()
        return x.grad, g is x.grad, x.grad.requires_grad, g._version, type(x.grad.grad_fn).__name__
    same(run)


def test_create_graph_after_plain_adds_out_of_place():
    def run(m):
        x = m.ones(2, requires_grad=True)
        (x * 3).sum().backward()
        g = x.grad
        (x * x).sum().backward(create_graph=True)
        return x.grad, g is x.grad, x.grad.requires_grad, g._version, type(x.grad.grad_fn).__name__
    same(run)


def test_a_leaf_set_not_to_require_grad_after_use_takes_no_gradient():
    def run(m):
        x = m.ones(2, requires_grad=True)
        w = m.ones(2, requires_grad=True)
        log = []
        x.register_hook(lambda g: log.append("hook"))
        x.register_post_accumulate_grad_hook(lambda t: log.append("post"))
        y = (x * w * 2).sum()
        x.requires_grad_(False)
        y.backward()
        return x.grad, w.grad, log
    same(run)
