"""L-BFGS (torch.optim.LBFGS), torch's algorithm step for step: a closure re-evaluates the
loss, the search direction comes from the two-loop recursion over the last `history_size`
steps, and the step length is lr (the first iteration scaled by 1 / |g|_1). The strong-Wolfe
line search is not implemented yet."""
from ..tensor import Tensor
from ..grad_mode import no_grad, enable_grad
from .. import creation as C
from ..ops import functional as O
from .optimizer import Optimizer

__all__ = ["LBFGS"]


class LBFGS(Optimizer):
    def __init__(self, params, lr=1, max_iter=20, max_eval=None, tolerance_grad=1e-7, tolerance_change=1e-9,
                 history_size=100, line_search_fn=None):
        if isinstance(lr, Tensor) and lr.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if max_eval is None:
            max_eval = max_iter * 5 // 4
        if line_search_fn is not None:
            if line_search_fn != "strong_wolfe":
                raise RuntimeError("only 'strong_wolfe' is supported")
            raise NotImplementedError("LBFGS(line_search_fn='strong_wolfe') is not implemented yet; the default "
                                      "(a fixed step of lr) is")
        defaults = dict(lr=lr, max_iter=max_iter, max_eval=max_eval, tolerance_grad=tolerance_grad,
                        tolerance_change=tolerance_change, history_size=history_size, line_search_fn=line_search_fn)
        super().__init__(params, defaults)
        if len(self.param_groups) != 1:
            raise ValueError("LBFGS doesn't support per-parameter options (parameter groups)")
        self._params = self.param_groups[0]["params"]

    def _gather_flat_grad(self):
        views = [C.zeros(p.numel(), dtype=p.dtype) if p.grad is None else p.grad.reshape(-1) for p in self._params]
        return O.cat(views, 0)

    def _add_grad(self, step_size, update):
        offset = 0
        for p in self._params:
            n = p.numel()
            p.add_(update[offset:offset + n].view_as(p), alpha=step_size)
            offset += n

    def step(self, closure):
        """One optimisation step: up to max_iter iterations, each one evaluation of the closure."""
        with no_grad():
            return self._step(closure)

    def _step(self, closure):
        def evaluate():
            with enable_grad():
                return closure()
        group = self.param_groups[0]
        lr, max_iter, max_eval = group["lr"], group["max_iter"], group["max_eval"]
        tolerance_grad, tolerance_change = group["tolerance_grad"], group["tolerance_change"]
        history_size = group["history_size"]
        state = self.state[self._params[0]]
        state.setdefault("func_evals", 0)
        state.setdefault("n_iter", 0)
        orig_loss = evaluate()
        loss = float(orig_loss)
        current_evals = 1
        state["func_evals"] += 1
        flat_grad = self._gather_flat_grad()
        opt_cond = float(flat_grad.abs().max()) <= tolerance_grad
        if opt_cond:
            return orig_loss
        d, t = state.get("d"), state.get("t")
        old_dirs, old_stps, ro = state.get("old_dirs"), state.get("old_stps"), state.get("ro")
        H_diag, prev_flat_grad, prev_loss = state.get("H_diag"), state.get("prev_flat_grad"), state.get("prev_loss")
        n_iter = 0
        while n_iter < max_iter:
            n_iter += 1
            state["n_iter"] += 1
            if state["n_iter"] == 1:
                d = -flat_grad
                old_dirs, old_stps, ro = [], [], []
                H_diag = 1
            else:
                y = flat_grad - prev_flat_grad
                s = d * t
                ys = O.dot(y, s)
                if float(ys) > 1e-10:
                    if len(old_dirs) == history_size:
                        old_dirs.pop(0)
                        old_stps.pop(0)
                        ro.pop(0)
                    old_dirs.append(y)
                    old_stps.append(s)
                    ro.append(1.0 / ys)
                    H_diag = ys / O.dot(y, y)
                num_old = len(old_dirs)
                al = [None] * num_old
                q = -flat_grad
                for i in range(num_old - 1, -1, -1):
                    al[i] = O.dot(old_stps[i], q) * ro[i]
                    q = q - old_dirs[i] * al[i]
                r = q * H_diag
                for i in range(num_old):
                    be_i = O.dot(old_dirs[i], r) * ro[i]
                    r = r + old_stps[i] * (al[i] - be_i)
                d = r
            prev_flat_grad = flat_grad.clone()
            prev_loss = loss
            if state["n_iter"] == 1:
                t = min(1.0, 1.0 / float(flat_grad.abs().sum())) * lr
            else:
                t = lr
            gtd = float(O.dot(flat_grad, d))
            if gtd > -tolerance_change:
                break
            ls_func_evals = 0
            self._add_grad(t, d)
            if n_iter != max_iter:
                loss = float(evaluate())
                flat_grad = self._gather_flat_grad()
                opt_cond = float(flat_grad.abs().max()) <= tolerance_grad
                ls_func_evals = 1
            current_evals += ls_func_evals
            state["func_evals"] += ls_func_evals
            if n_iter == max_iter or current_evals >= max_eval or opt_cond:
                break
            if float((d * t).abs().max()) <= tolerance_change:
                break
            if abs(loss - prev_loss) < tolerance_change:
                break
        state.update(d=d, t=t, old_dirs=old_dirs, old_stps=old_stps, ro=ro, H_diag=H_diag,
                     prev_flat_grad=prev_flat_grad, prev_loss=prev_loss)
        return orig_loss
