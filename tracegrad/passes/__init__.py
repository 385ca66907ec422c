"""Graph -> Graph passes. Each is a pure function with a verb for a name; the pipelines
are the ordered lists below."""
from .dead_code import eliminate_dead_code  # noqa: F401
from .eliminate_common_subexpressions import eliminate_common_subexpressions  # noqa: F401
from .fold_constants import fold_constants  # noqa: F401
from .simplify import simplify, simplify_before_autodiff  # noqa: F401
from .partition import partition  # noqa: F401
from .fuse import group_fusions  # noqa: F401
from .decompose import decompose_row_ops, decompose_derivative_ops, \
    share_forward_masks  # noqa: F401
from .collect_terms import collect_terms  # noqa: F401


def eliminate_dead_values(graph, own=False):
    """Dead code, dropping the saved inputs nothing reads."""
    return eliminate_dead_code(graph, drop_inputs=("saved",), own=own)


# compile.py runs: FORWARD_PIPELINE on the traced graph; autodiff; BACKWARD_PIPELINE on the
# derived graph; partition (min-cut: saved vs recomputed); RECOMPUTED_PIPELINE on the
# backward with what it recomputes and on the forward program; group_fusions on both;
# then codegen. The forward pipeline simplifies only in ways that leave the derivative
# autodiff takes as eager autograd takes it (simplify_before_autodiff). Every pass in
# them keeps each value's IEEE result in its dtype. collect_terms is in none of them: it
# reassociates and factors floating-point sums (in float32 it changed 56% of the
# elements of GELU's backward, by up to 0.5% where terms cancel), so it is a pass to
# call by hand where reassociated results are acceptable. Common subexpressions wait
# until after autodiff: two uses of x * 3.3 merged before it get one derivative,
# (g1 + g2) * 3.3, where eager autograd (and torch) sum g1 * 3.3 + g2 * 3.3, which
# rounds otherwise.
FORWARD_PIPELINE = [fold_constants, decompose_row_ops, simplify_before_autodiff, eliminate_dead_code]
BACKWARD_PIPELINE = [decompose_derivative_ops, fold_constants, simplify, eliminate_common_subexpressions, eliminate_dead_values]
RECOMPUTED_PIPELINE = [decompose_derivative_ops, simplify, eliminate_common_subexpressions, eliminate_dead_code]
# the passes above that take `own=True`: the graph is handed over (a pipeline's own result of
# an earlier pass, which nothing else holds), and they may change it instead of copying it
HANDED_OVER = frozenset({eliminate_dead_code, eliminate_dead_values})
