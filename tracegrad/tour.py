"""A short guided tour: record a graph, derive its backward graph, get gradients.

Run with `python -m tracegrad.tour`.
"""
import tracegrad as torch
from tracegrad.codegen import generate


def section(title):
    print()
    print("=" * 72)
    print(title)
    print("=" * 72)


def main():
    section("1. Eager ops record a graph, as in PyTorch")
    w = torch.tensor([1.], requires_grad=True)
    x = torch.tensor([2.], requires_grad=True)
    y = torch.mul(torch.add(w, x), torch.add(w, 1))
    print("y =", y)
    print("y.grad_fn =", y.grad_fn)
    print("y.grad_fn.next_functions =", y.grad_fn.next_functions)

    section("2. The recorded forward graph, as IR (a networkx DAG printed as Python)")
    print(torch.ir.graph_of(y))

    section("3. The backward graph the differentiation pass derives from it")
    bwd = torch.ir.backward_graph_of(y)
    print(bwd)

    section("4. ... and the numpy code generated for it")
    print(generate(bwd, "backward")[0])

    section("5. backward() runs it; gradients accumulate as in PyTorch")
    y.backward(retain_graph=True)
    y.backward()
    print("w.grad =", w.grad, "  (d/dw of (w + x)(w + 1) at w=1, x=2, twice)")
    print("x.grad =", x.grad)

    section("6. Higher derivatives: the backward graph is differentiated again")
    x = torch.tensor([0.5, -1.0, 2.0], requires_grad=True)
    f = (torch.tanh(x) ** 2).sum()
    g = f
    for order in range(1, 4):
        g, = torch.autograd.grad(g.sum(), x, create_graph=True)
        print(f"d^{order}f/dx^{order} =", g)

    section("7. A small MLP step")
    torch.manual_seed(0)
    W1 = torch.randn(4, 8, requires_grad=True)
    W2 = torch.randn(8, 3, requires_grad=True)
    data = torch.randn(16, 4)
    target = torch.randint(0, 3, (16,))
    logits = torch.relu(data @ W1) @ W2
    logp = torch.log_softmax(logits, dim=1)
    loss = -logp[torch.arange(16), target].mean()
    loss.backward()
    print("loss =", loss)
    print("|dL/dW1| =", W1.grad.norm(), " |dL/dW2| =", W2.grad.norm())
    print()
    print(torch.ir.graph_of(loss))


if __name__ == "__main__":
    main()
