"""Tensor and grad_fn hooks against torch. What a hook may return: a tensor hook, a grad_fn
pre-hook or post-hook, an AccumulateGrad hook and a post-accumulate-grad hook each get
torch's checks (a tuple of the right length, no value where the gradient was None, the same
dtype, device and size) and raise torch's error and message otherwise; a grad_fn hook may
make a gradient undefined. The order in which leaves' hooks run."""
import pytest

from test_autograd_parity import same, raises


def _leaf(m):
    return m.tensor([1., 2.], requires_grad=True)


TENSOR_HOOKS = {
    "other_size": lambda m: lambda g: m.ones(3),
    "other_dtype": lambda m: lambda g: g.double(),
    "int_dtype": lambda m: lambda g: g.int(),
    "dtype_checked_before_size": lambda m: lambda g: g.double()[:1],
    "a_number": lambda m: lambda g: 3.0,
    "a_list": lambda m: lambda g: [g],
}


@pytest.mark.parametrize("on", ["leaf", "non_leaf"])
@pytest.mark.parametrize("create_graph", [False, True])
@pytest.mark.parametrize("ret", sorted(TENSOR_HOOKS))
def test_tensor_hook_returning_a_wrong_value_raises(ret, create_graph, on):
    def run(m):
        x = _leaf(m)
        y = x * 2 if on == "non_leaf" else x
        y.register_hook(TENSOR_HOOKS[ret](m))
        m.autograd.grad((y * 3).sum(), x, create_graph=create_graph)
    raises(run)


def test_hook_name_in_messages_is_unknown_without_a_name():
    class Hook:
        def __call__(self, g):
            return g.double()

    def run(m):
        x = _leaf(m)
        x.register_hook(Hook())
        (x * 3).sum().backward()
    raises(run)


POST = {
    "scaled": lambda m: lambda gi, go: (gi[0] * 3, None),
    "all_none": lambda m: lambda gi, go: (None, None),
    "other_dtype": lambda m: lambda gi, go: (gi[0].double(), None),
    "other_size": lambda m: lambda gi, go: (m.ones(3), None),
    "not_a_tuple": lambda m: lambda gi, go: 5,
    "a_list": lambda m: lambda gi, go: [gi[0], None],
    "a_number_inside": lambda m: lambda gi, go: (5, None),
    "too_few": lambda m: lambda gi, go: (gi[0],),
    "value_for_a_none": lambda m: lambda gi, go: (gi[0], gi[0]),
}
PRE = {
    "scaled": lambda m: lambda go: (go[0] * 3,),
    "none": lambda m: lambda go: (None,),
    "too_many": lambda m: lambda go: (go[0] * 3, go[0]),
    "other_size": lambda m: lambda go: (m.ones(3),),
    "other_dtype": lambda m: lambda go: (go[0].double(),),
    "a_number_inside": lambda m: lambda go: (3.0,),
    "a_list": lambda m: lambda go: [go[0]],
}


@pytest.mark.parametrize("create_graph", [False, True])
@pytest.mark.parametrize("ret", sorted(POST))
def test_grad_fn_post_hook_results(ret, create_graph):
    def run(m):
        x = _leaf(m)
        y = x * 2                     # MulBackward0: grad_inputs (x's, None for the number)
        y.grad_fn.register_hook(POST[ret](m))
        (y * x).sum().backward(create_graph=create_graph)
        return x.grad
    same(run, expect=None)


@pytest.mark.parametrize("create_graph", [False, True])
@pytest.mark.parametrize("ret", sorted(PRE))
def test_grad_fn_pre_hook_results(ret, create_graph):
    def run(m):
        x = _leaf(m)
        y = x * 2
        y.grad_fn.register_prehook(PRE[ret](m))
        g, = m.autograd.grad((y * x).sum(), x, create_graph=create_graph)
        return g
    same(run, expect=None)


def test_a_pre_hook_making_a_gradient_undefined_on_one_of_two_paths():
    def run(m):
        x = _leaf(m)
        y = x.exp()
        y.grad_fn.register_prehook(lambda go: (None,))
        (y * 2 + x * 5).sum().backward()
        return x.grad
    same(run)


@pytest.mark.parametrize("ret", ["scaled", "too_many", "other_size", "a_list"])
def test_accumulate_grad_pre_hook_results(ret):
    def run(m):
        x = _leaf(m)
        y = x * 2
        y.grad_fn.next_functions[0][0].register_prehook(PRE[ret](m))
        y.sum().backward()
        return x.grad
    same(run, expect=None)


def test_accumulate_grad_pre_hook_returning_none_leaves_grad_unset():
    def run(m):
        x = _leaf(m)
        (x * 2).grad_fn.next_functions[0][0].register_prehook(lambda go: (None,))
        (x * 2).sum().backward()
        return x.grad
    same(run)


def test_accumulate_grad_post_hook_must_return_none():
    def run(m):
        x = _leaf(m)
        y = x * 2
        y.grad_fn.next_functions[0][0].register_hook(lambda gi, go: (m.ones(2),))
        y.sum().backward()
    raises(run)


def test_post_accumulate_grad_hook_checks():
    def on_plain(m):
        m.tensor([1., 2.]).register_post_accumulate_grad_hook(lambda t: None)

    def returning(m):
        x = _leaf(m)
        x.register_post_accumulate_grad_hook(lambda t: t * 2)
        (x * 3).sum().backward()
    raises(on_plain)
    raises(returning)


# == the order leaves' hooks run in ==========================================================

ORDER_GRAPHS = {
    "mul": lambda m, a, b, c: (a * b).sum(),
    "three_leaves": lambda m, a, b, c: ((a * b) + c.exp()).sum(),
    "matmul_and_bias": lambda m, a, b, c: (a[None] @ m.stack([b, c]) + c).sum(),
    "leaf_used_twice": lambda m, a, b, c: (a * a * b).sum(),
    "through_a_non_leaf": lambda m, a, b, c: ((a * b).exp() * c).sum(),
}


@pytest.mark.parametrize("graph", sorted(ORDER_GRAPHS))
def test_leaf_hooks_run_in_torchs_order(graph):
    # torch runs a leaf's AccumulateGrad (and its hooks) once its last consumer has run, the
    # leaves of one node in argument order: (a * b) runs a's hooks before b's
    def run(m):
        a, b, c = (m.tensor(v, requires_grad=True) for v in ([1., 2.], [3., 4.], [5., 6.]))
        log = []
        for name, t in zip("abc", (a, b, c)):
            t.register_hook(lambda g, name=name: log.append(name))
        ORDER_GRAPHS[graph](m, a, b, c).backward()
        return log
    same(run)


def test_multi_grad_hook_any_sees_the_first_leaf_torch_reaches():
    def run(m):
        a, b = m.tensor([1., 2.], requires_grad=True), m.tensor([3., 4.], requires_grad=True)
        log = []
        m.autograd.graph.register_multi_grad_hook((a, b), lambda g: log.append(g.tolist()), mode="any")
        (a * b).sum().backward()
        return log
    same(run)
