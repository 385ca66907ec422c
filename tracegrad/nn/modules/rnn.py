"""Recurrent layers (torch.nn.RNN, LSTM, GRU and their cells), written in tracegrad ops: the
input projection of every time step is one matrix product per layer and direction, then a
loop over time applies the cell. Parameters are named, shaped and initialised as torch's,
so state_dicts load both ways."""
import math
import numbers
import warnings

from .module import Module
from ..parameter import Parameter
from .. import functional as F
from ...ops import functional as O
from ... import creation as C
from .. import init
from ...amp import policy as _autocast

__all__ = ["RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell"]

_GATES = {"LSTM": 4, "GRU": 3, "RNN_TANH": 1, "RNN_RELU": 1}


def _linear_t(x, w, b):
    low = _autocast.lower_dtype(x)
    if low is not None:                     # (autocast: a linear layer, bias included, in its dtype)
        with _autocast.shielded():
            return _linear_t(*_autocast.cast_tree((x, w, b), low))
    y = O.matmul(x, O.transpose(w, 0, 1))
    return y + b if b is not None else y


def _rnn_cell(x_proj, h, w_hh, b_hh, relu):
    pre = x_proj + _linear_t(h, w_hh, b_hh)
    return O.relu(pre) if relu else O.tanh(pre)


def _lstm_cell(x_proj, hc, w_hh, b_hh, w_hr=None):
    h, c = hc
    gates = x_proj + _linear_t(h, w_hh, b_hh)
    i, f, g, o = O.chunk(gates, 4, -1)
    c = O.sigmoid(f) * c + O.sigmoid(i) * O.tanh(g)
    h = O.sigmoid(o) * O.tanh(c)
    # with proj_size, the hidden state is projected down: h' = W_hr (o * tanh(c'))
    return (h if w_hr is None else _linear_t(h, w_hr, None)), c


def _gru_cell(x_proj, h, w_hh, b_hh):
    hg = _linear_t(h, w_hh, b_hh)
    i_r, i_z, i_n = O.chunk(x_proj, 3, -1)
    h_r, h_z, h_n = O.chunk(hg, 3, -1)
    r = O.sigmoid(i_r + h_r)
    z = O.sigmoid(i_z + h_z)
    n = O.tanh(i_n + r * h_n)
    return (h - n) * z + n


def _reset_uniform(m):
    """torch's initialisation of recurrent weights and biases: U(-1/sqrt(hidden), 1/sqrt(hidden))."""
    stdv = 1.0 / math.sqrt(m.hidden_size) if m.hidden_size > 0 else 0
    for w in m.parameters():
        init.uniform_(w, -stdv, stdv)


class RNNBase(Module):
    def __init__(self, mode, input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
                 bidirectional=False, proj_size=0, device=None, dtype=None):
        super().__init__()
        self.mode = mode
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.bias = bias
        self.batch_first = batch_first
        self.dropout = float(dropout)
        self.bidirectional = bidirectional
        self.proj_size = proj_size
        if not isinstance(dropout, numbers.Number) or not 0 <= dropout <= 1 or isinstance(dropout, bool):
            raise ValueError("dropout should be a number in range [0, 1] representing the probability of an element "
                             "being zeroed")
        if dropout > 0 and num_layers == 1:
            warnings.warn(f"dropout option adds dropout after all but last recurrent layer, so non-zero dropout "
                          f"expects num_layers greater than 1, but got dropout={dropout} and num_layers={num_layers}")
        if not isinstance(hidden_size, int) or hidden_size <= 0:
            raise ValueError("hidden_size must be greater than zero" if isinstance(hidden_size, int) else
                             f"hidden_size should be of type int, got: {type(hidden_size).__name__}")
        if num_layers <= 0:
            raise ValueError("num_layers must be greater than zero")
        if proj_size < 0:
            raise ValueError("proj_size should be a positive integer or zero to disable projections")
        if proj_size >= hidden_size:
            raise ValueError("proj_size has to be smaller than hidden_size")
        gate_size = _GATES[mode] * hidden_size
        dirs = 2 if bidirectional else 1
        real_hidden = proj_size if proj_size > 0 else hidden_size
        self._flat_weights_names = []
        self._all_weights = []
        for layer in range(num_layers):
            for d in range(dirs):
                in_size = input_size if layer == 0 else real_hidden * dirs
                suffix = "_reverse" if d == 1 else ""
                names = [f"weight_ih_l{layer}{suffix}", f"weight_hh_l{layer}{suffix}"]
                shapes = [(gate_size, in_size), (gate_size, real_hidden)]
                if bias:
                    names += [f"bias_ih_l{layer}{suffix}", f"bias_hh_l{layer}{suffix}"]
                    shapes += [(gate_size,), (gate_size,)]
                if proj_size > 0:
                    names.append(f"weight_hr_l{layer}{suffix}")
                    shapes.append((proj_size, hidden_size))
                for name, shape in zip(names, shapes):
                    setattr(self, name, Parameter(C.empty(*shape, dtype=dtype)))
                self._flat_weights_names.extend(names)
                self._all_weights.append(names)
        self.reset_parameters()

    def reset_parameters(self):
        _reset_uniform(self)

    @property
    def all_weights(self):
        return [[getattr(self, n) for n in names] for names in self._all_weights]

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.proj_size != 0:
            s += f", proj_size={self.proj_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if self.batch_first is not False:
            s += f", batch_first={self.batch_first}"
        if self.dropout != 0:
            s += f", dropout={self.dropout}"
        if self.bidirectional is not False:
            s += f", bidirectional={self.bidirectional}"
        return s

    def _weights(self, layer, d):
        suffix = "_reverse" if d == 1 else ""
        get = lambda n: getattr(self, f"{n}_l{layer}{suffix}", None)      # noqa: E731
        return get("weight_ih"), get("weight_hh"), get("bias_ih"), get("bias_hh"), get("weight_hr")

    def _check_input(self, input, batched):
        want = 3 if batched else 2
        if input.ndim != want:
            raise ValueError(f"{type(self).__name__}: Expected input to be 2D or 3D, got {input.ndim}D instead")
        if input.shape[-1] != self.input_size:
            raise RuntimeError(f"input.size(-1) must be equal to input_size. Expected {self.input_size}, got "
                               f"{input.shape[-1]}")

    def _check_hidden(self, hx, expected, what="hidden"):
        if tuple(hx.shape) != tuple(expected):
            raise RuntimeError(f"Expected {what} size {tuple(expected)}, got {list(hx.shape)}")

    def forward(self, input, hx=None):
        # autocast: LSTM and RNN run in its dtype, their weights and state cast too (torch's
        # mkldnn_rnn_layer); GRU's linear layers run in it (its state stays in the inputs' dtype)
        low = _autocast.lower_dtype(input) if self.mode != "GRU" else None
        if low is None:              # (GRU: each of its linear layers in autocast's dtype, the rest promoted)
            return self._forward(input, hx, None)
        with _autocast.shielded():
            input = _autocast.cast_tree((input,), low)[0]
            hx = _autocast.cast_tree(hx, low) if isinstance(hx, tuple) else _autocast.cast_tree((hx,), low)[0]
            return self._forward(input, hx, low)

    def _forward(self, input, hx, low):
        if input.ndim not in (2, 3):
            raise ValueError(f"{type(self).__name__}: Expected input to be 2D or 3D, got {input.ndim}D instead")
        batched = input.ndim == 3
        self._check_input(input, batched)
        x = input if batched else O.unsqueeze(input, 1)
        if batched and self.batch_first:
            x = O.transpose(x, 0, 1)
        seq, batch = x.shape[0], x.shape[1]
        dirs = 2 if self.bidirectional else 1
        lstm = self.mode == "LSTM"
        real_hidden = self.proj_size if self.proj_size > 0 else self.hidden_size
        shape = (self.num_layers * dirs, batch, real_hidden)
        cell_shape = (self.num_layers * dirs, batch, self.hidden_size)
        if hx is None:
            h0 = C.zeros(*shape, dtype=input.dtype)
            c0 = C.zeros(*cell_shape, dtype=input.dtype) if lstm else None
        else:
            if lstm:
                if not isinstance(hx, tuple) or len(hx) != 2:
                    raise RuntimeError("LSTM expects hx to be a tuple (h_0, c_0)")
                h0, c0 = hx
            else:
                h0, c0 = hx, None
            if not batched:
                if h0.ndim != 2:
                    raise RuntimeError(f"For unbatched 2-D input, hx should also be 2-D but got {h0.ndim}-D tensor")
                h0 = O.unsqueeze(h0, 1)
                c0 = O.unsqueeze(c0, 1) if c0 is not None else None
            elif h0.ndim != 3:
                raise RuntimeError(f"For batched 3-D input, hx should also be 3-D but got {h0.ndim}-D tensor")
            self._check_hidden(h0, shape, "hidden" if not lstm else "hidden[0]")
            if c0 is not None:
                self._check_hidden(c0, cell_shape, "hidden[1]")
        layer_in = x
        h_n, c_n = [], []
        for layer in range(self.num_layers):
            outs = []
            for d in range(dirs):
                w_ih, w_hh, b_ih, b_hh, w_hr = self._weights(layer, d)
                if low is not None:
                    w_ih, w_hh, b_ih, b_hh, w_hr = _autocast.cast_tree((w_ih, w_hh, b_ih, b_hh, w_hr), low)
                proj = _linear_t(layer_in, w_ih, b_ih)            # every step's input projection at once
                k = layer * dirs + d
                state = (h0[k], c0[k]) if lstm else h0[k]
                steps = range(seq - 1, -1, -1) if d == 1 else range(seq)
                ys = [None] * seq
                for t in steps:
                    if lstm:
                        state = _lstm_cell(proj[t], state, w_hh, b_hh, w_hr)
                        ys[t] = state[0]
                    elif self.mode == "GRU":
                        state = _gru_cell(proj[t], state, w_hh, b_hh)
                        ys[t] = state
                    else:
                        state = _rnn_cell(proj[t], state, w_hh, b_hh, self.mode == "RNN_RELU")
                        ys[t] = state
                outs.append(O.stack(ys, 0) if seq else C.zeros(0, batch, real_hidden, dtype=input.dtype))
                if lstm:
                    h_n.append(state[0])
                    c_n.append(state[1])
                else:
                    h_n.append(state)
            layer_in = outs[0] if dirs == 1 else O.cat(outs, -1)
            if self.dropout and self.training and layer < self.num_layers - 1:
                layer_in = F.dropout(layer_in, self.dropout, training=True)
        out = layer_in
        h = O.stack(h_n, 0)
        c = O.stack(c_n, 0) if lstm else None
        if batched and self.batch_first:
            out = O.transpose(out, 0, 1)
        if not batched:
            out = O.squeeze(out, 1)
            h = O.squeeze(h, 1)
            c = O.squeeze(c, 1) if c is not None else None
        return (out, (h, c)) if lstm else (out, h)


class RNN(RNNBase):
    """Elman RNN: h' = tanh (or relu)(x W_ih^T + b_ih + h W_hh^T + b_hh)."""

    def __init__(self, *args, **kwargs):
        if "proj_size" in kwargs:
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        nonlinearity = kwargs.pop("nonlinearity", "tanh")
        if len(args) > 3:
            nonlinearity = args[3]
            args = args[:3] + args[4:]
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' or 'relu'.")
        self.nonlinearity = nonlinearity
        super().__init__("RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU", *args, **kwargs)


class LSTM(RNNBase):
    """Long short-term memory: gates i, f, g, o from x and h; c' = f c + i g; h' = o tanh(c')."""

    def __init__(self, *args, **kwargs):
        super().__init__("LSTM", *args, **kwargs)


class GRU(RNNBase):
    """Gated recurrent unit: gates r, z; n = tanh(x W_in + b_in + r (h W_hn + b_hn)); h' = (1 - z) n + z h."""

    def __init__(self, *args, **kwargs):
        if "proj_size" in kwargs:
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        super().__init__("GRU", *args, **kwargs)


class RNNCellBase(Module):
    def __init__(self, input_size, hidden_size, bias, num_chunks, device=None, dtype=None):
        super().__init__()
        self.input_size, self.hidden_size, self.bias = input_size, hidden_size, bias
        self.weight_ih = Parameter(C.empty(num_chunks * hidden_size, input_size, dtype=dtype))
        self.weight_hh = Parameter(C.empty(num_chunks * hidden_size, hidden_size, dtype=dtype))
        if bias:
            self.bias_ih = Parameter(C.empty(num_chunks * hidden_size, dtype=dtype))
            self.bias_hh = Parameter(C.empty(num_chunks * hidden_size, dtype=dtype))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def reset_parameters(self):
        _reset_uniform(self)

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if getattr(self, "nonlinearity", "tanh") != "tanh":
            s += f", nonlinearity={self.nonlinearity}"
        return s

    def _prepare(self, input, hx, n):
        if input.ndim not in (1, 2):
            raise ValueError(f"{type(self).__name__}: Expected input to be 1D or 2D, got {input.ndim}D instead")
        if hx is not None:
            for h in (hx if isinstance(hx, tuple) else (hx,)):
                if h.ndim not in (1, 2):
                    raise ValueError(f"{type(self).__name__}: Expected hidden to be 1D or 2D, got {h.ndim}D instead")
        batched = input.ndim == 2
        x = input if batched else O.unsqueeze(input, 0)
        if hx is None:
            zeros = C.zeros(x.shape[0], self.hidden_size, dtype=input.dtype)
            hx = (zeros, zeros) if n == 2 else zeros
        elif not batched:
            hx = tuple(O.unsqueeze(h, 0) for h in hx) if n == 2 else O.unsqueeze(hx, 0)
        return x, hx, batched


class RNNCell(RNNCellBase):
    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", device=None, dtype=None):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"Unknown nonlinearity: {nonlinearity}")
        self.nonlinearity = nonlinearity
        super().__init__(input_size, hidden_size, bias, 1, device, dtype)

    def forward(self, input, hx=None):
        x, h, batched = self._prepare(input, hx, 1)
        out = _rnn_cell(_linear_t(x, self.weight_ih, self.bias_ih), h, self.weight_hh, self.bias_hh,
                        self.nonlinearity == "relu")
        return out if batched else O.squeeze(out, 0)


class LSTMCell(RNNCellBase):
    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, 4, device, dtype)

    def forward(self, input, hx=None):
        x, hc, batched = self._prepare(input, hx, 2)
        h, c = _lstm_cell(_linear_t(x, self.weight_ih, self.bias_ih), hc, self.weight_hh, self.bias_hh)
        return (h, c) if batched else (O.squeeze(h, 0), O.squeeze(c, 0))


class GRUCell(RNNCellBase):
    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, 3, device, dtype)

    def forward(self, input, hx=None):
        x, h, batched = self._prepare(input, hx, 1)
        out = _gru_cell(_linear_t(x, self.weight_ih, self.bias_ih), h, self.weight_hh, self.bias_hh)
        return out if batched else O.squeeze(out, 0)
