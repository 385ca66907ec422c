"""Attention layers (torch.nn.MultiheadAttention, TransformerEncoderLayer, TransformerEncoder),
composed of tracegrad ops with torch's parameter names, shapes, initialisation and masks."""
import copy
import math
import warnings

from .module import Module
from .container import ModuleList
from .layers import Linear, Dropout, LayerNorm, NonDynamicallyQuantizableLinear
from ..parameter import Parameter
from .. import functional as F
from .. import init
from ...ops import functional as O
from ... import creation as C
from ... import _dtype as D

__all__ = ["MultiheadAttention", "TransformerEncoderLayer", "TransformerEncoder", "TransformerDecoderLayer",
           "TransformerDecoder", "Transformer"]


def _additive(mask, dtype):
    """A boolean mask (True: not allowed) as 0 / -inf to add to scores; a float mask as it is."""
    if mask is None:
        return None
    if mask.dtype is D.bool_:
        return O.masked_fill(C.zeros(*mask.shape, dtype=dtype), mask, float("-inf"))
    return mask


def _pad_column(mask):
    """One more key position, allowed (a zero added to its scores), as torch pads its masks for
    the bias and zero attention keys."""
    return None if mask is None else F.pad(mask, (0, 1))


def _shape_check(query, key, value, key_padding_mask, attn_mask, num_heads):
    """torch's checks of the inputs' ranks; whether the call is batched."""
    if query.ndim == 3:
        kind, want_kpm = "batched (3-D)", 2
    elif query.ndim == 2:
        kind, want_kpm = "unbatched (2-D)", 1
    else:
        raise AssertionError(f"query should be unbatched 2D or batched 3D tensor but received {query.ndim}-D "
                             f"query tensor")
    if key.ndim != query.ndim or value.ndim != query.ndim:
        raise AssertionError(f"For {kind} `query`, expected `key` and `value` to be {query.ndim}-D but found "
                             f"{key.ndim}-D and {value.ndim}-D tensors respectively")
    if key_padding_mask is not None and key_padding_mask.ndim != want_kpm:
        raise AssertionError(f"For {kind} `query`, expected `key_padding_mask` to be `None` or {want_kpm}-D but found "
                             f"{key_padding_mask.ndim}-D tensor instead")
    if attn_mask is not None:
        if attn_mask.ndim not in (2, 3):
            raise AssertionError(f"For {kind} `query`, expected `attn_mask` to be `None`, 2-D or 3-D but found "
                                 f"{attn_mask.ndim}-D tensor instead")
        if query.ndim == 2 and attn_mask.ndim == 3:
            expected = (num_heads, query.shape[0], key.shape[0])
            if tuple(attn_mask.shape) != expected:
                raise AssertionError(f"Expected `attn_mask` shape to be {expected} but got {attn_mask.shape}")
    return query.ndim == 3


def multi_head_attention_forward(query, key, value, embed_dim_to_check, num_heads, in_proj_weight, in_proj_bias,
                                 bias_k, bias_v, add_zero_attn, dropout_p, out_proj_weight, out_proj_bias,
                                 training=True, key_padding_mask=None, need_weights=True, attn_mask=None,
                                 use_separate_proj_weight=False, q_proj_weight=None, k_proj_weight=None,
                                 v_proj_weight=None, static_k=None, static_v=None, average_attn_weights=True,
                                 is_causal=False):
    """torch.nn.functional.multi_head_attention_forward: softmax(q k^T / sqrt(head_dim) + masks) v
    per head, the heads concatenated and projected; sequences first, (L, N, E) (or unbatched
    (L, E)). Learned bias keys/values (bias_k, bias_v), a zero key/value (add_zero_attn) and
    precomputed per-head keys/values (static_k, static_v: (N * num_heads, S, head_dim)) join the
    keys as torch's. Returns (output, weights averaged over heads or per head, or None)."""
    batched = _shape_check(query, key, value, key_padding_mask, attn_mask, num_heads)
    for m, name, other, other_name in ((key_padding_mask, "key_padding_mask", attn_mask, "attn_mask"),
                                       (attn_mask, "attn_mask", None, "")):
        if m is not None and m.dtype is not D.bool_ and not m.dtype.is_floating_point:
            raise AssertionError(f"only bool and floating types of {name} are supported")
        if m is not None and other is not None and m.dtype is not other.dtype:
            warnings.warn(f"Support for mismatched {name} and {other_name} is deprecated. Use same type for both "
                          f"instead.", UserWarning, stacklevel=3)
    if not batched:
        query, key, value = (O.unsqueeze(t, 1) for t in (query, key, value))
        if key_padding_mask is not None:
            key_padding_mask = O.unsqueeze(key_padding_mask, 0)
    L, N, E = query.shape
    S = key.shape[0]
    H = num_heads
    if is_causal and attn_mask is None:
        raise RuntimeError("Need attn_mask if specifying the is_causal hint. You may use the Transformer module "
                           "method `generate_square_subsequent_mask` to create this mask.")
    if E != embed_dim_to_check:
        raise AssertionError(f"was expecting embedding dimension of {embed_dim_to_check}, but got {E}")
    hd = E // H
    if hd * H != E:
        raise AssertionError(f"embed_dim {E} not divisible by num_heads {H}")
    if use_separate_proj_weight:
        if tuple(key.shape[:2]) != tuple(value.shape[:2]):
            raise AssertionError(f"key's sequence and batch dims {key.shape[:2]} do not match value's "
                                 f"{value.shape[:2]}")
        for w, name in ((q_proj_weight, "q"), (k_proj_weight, "k"), (v_proj_weight, "v")):
            if w is None:
                raise AssertionError(f"use_separate_proj_weight is True but {name}_proj_weight is None")
        wq, wk, wv = q_proj_weight, k_proj_weight, v_proj_weight
    else:
        if tuple(key.shape) != tuple(value.shape):
            raise AssertionError(f"key shape {key.shape} does not match value shape {value.shape}")
        if in_proj_weight is None:
            raise AssertionError("use_separate_proj_weight is False but in_proj_weight is None")
        wq, wk, wv = O.chunk(in_proj_weight, 3, 0)
    bq, bk, bv = (None, None, None) if in_proj_bias is None else O.chunk(in_proj_bias, 3, 0)
    q = F.linear(query, wq, bq)
    k = F.linear(key, wk, bk)
    v = F.linear(value, wv, bv)
    mask = _additive(attn_mask, q.dtype)
    if mask is not None:
        if mask.ndim == 2:
            if tuple(mask.shape) != (L, S):
                raise RuntimeError(f"The shape of the 2D attn_mask is {mask.shape}, but should be {(L, S)}.")
            mask = O.unsqueeze(mask, 0)
        elif mask.ndim == 3:
            if tuple(mask.shape) != (N * H, L, S):
                raise RuntimeError(f"The shape of the 3D attn_mask is {mask.shape}, but should be {(N * H, L, S)}.")
        else:
            raise RuntimeError(f"attn_mask's dimension {mask.ndim} is not supported")
    kpm = _additive(key_padding_mask, q.dtype)
    if bias_k is not None and bias_v is not None:
        if static_k is not None:
            raise AssertionError("bias cannot be added to static key.")
        if static_v is not None:
            raise AssertionError("bias cannot be added to static value.")
        k = O.cat([k, bias_k.repeat(1, N, 1)])
        v = O.cat([v, bias_v.repeat(1, N, 1)])
        mask, kpm = _pad_column(mask), _pad_column(kpm)
    elif bias_k is not None or bias_v is not None:
        raise AssertionError("bias_k is set but bias_v is None" if bias_k is not None else
                             "bias_v is set but bias_k is None")
    # heads: (L, N, E) -> (N, H, L, hd); static keys and values come as (N * H, S, hd)
    def heads(t, static, name):
        """(S, N, E) -> (N, H, S, hd), or the given per-head values (N * H, S, hd) as they are."""
        if static is None:
            return O.permute(t.reshape(t.shape[0], N, H, hd), (1, 2, 0, 3))
        for dim, want in ((0, N * H), (2, hd)):
            if static.shape[dim] != want:
                raise AssertionError(f"expecting {name}.size({dim}) of {want}, but got {static.shape[dim]}")
        return static.reshape(N, H, static.shape[1], hd)
    q = heads(q, None, "q")
    k = heads(k, static_k, "static_k")
    v = heads(v, static_v, "static_v")
    if add_zero_attn:
        k = O.cat([k, C.zeros(N, H, 1, hd, dtype=k.dtype)], 2)
        v = O.cat([v, C.zeros(N, H, 1, hd, dtype=v.dtype)], 2)
        mask, kpm = _pad_column(mask), _pad_column(kpm)
    S = k.shape[2]
    if mask is not None:
        mask = mask.reshape(mask.shape[0] // H if mask.shape[0] != 1 else 1, H if mask.shape[0] != 1 else 1, L, S)
    if kpm is not None:
        for i, want in ((0, N), (1, S)):
            if kpm.shape[i] != want:
                raise AssertionError(f"Expected key_padded_mask.shape[{i}] to be {want}, but got {kpm.shape[i]}")
        kpm = kpm.reshape(N, 1, 1, S)
        mask = kpm if mask is None else mask + kpm
    scores = O.matmul(q * math.sqrt(1.0 / hd), O.transpose(k, -2, -1))
    if mask is not None:
        scores = scores + mask
    # torch computes the weights it returns with softmax (NaN in a fully masked row), and
    # without them calls scaled_dot_product_attention, whose softmax gives such a row zeros
    weights = F.softmax(scores, -1) if need_weights or mask is None else F._safe_softmax(scores)
    if dropout_p > 0.0 and training:
        weights = F.dropout(weights, dropout_p, training=True)
    out = O.matmul(weights, v)                                    # (N, H, L, hd)
    out = O.permute(out, (2, 0, 1, 3)).reshape(L, N, E)
    out = F.linear(out, out_proj_weight, out_proj_bias)
    if not batched:
        out = O.squeeze(out, 1)
    if not need_weights:
        return out, None
    w = O.mean(weights, 1) if average_attn_weights else weights
    if not batched:
        w = O.squeeze(w, 0)
    return out, w


F.multi_head_attention_forward = multi_head_attention_forward


class MultiheadAttention(Module):
    """softmax(q k^T / sqrt(head_dim) + mask) v per head, heads concatenated, then out_proj
    (F.multi_head_attention_forward with the module's parameters)."""

    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, add_bias_kv=False, add_zero_attn=False,
                 kdim=None, vdim=None, batch_first=False, device=None, dtype=None):
        if embed_dim <= 0 or num_heads <= 0:
            raise ValueError(f"embed_dim and num_heads must be greater than 0, got embed_dim={embed_dim} and "
                             f"num_heads={num_heads} instead")
        super().__init__()
        self.embed_dim = embed_dim
        self.kdim = kdim if kdim is not None else embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.num_heads = num_heads
        self.dropout = dropout
        self.batch_first = batch_first
        self.head_dim = embed_dim // num_heads
        if self.head_dim * num_heads != embed_dim:
            raise AssertionError("embed_dim must be divisible by num_heads")
        if self._qkv_same_embed_dim:
            self.in_proj_weight = Parameter(C.empty(3 * embed_dim, embed_dim, dtype=dtype))
            self.register_parameter("q_proj_weight", None)
            self.register_parameter("k_proj_weight", None)
            self.register_parameter("v_proj_weight", None)
        else:
            self.q_proj_weight = Parameter(C.empty(embed_dim, embed_dim, dtype=dtype))
            self.k_proj_weight = Parameter(C.empty(embed_dim, self.kdim, dtype=dtype))
            self.v_proj_weight = Parameter(C.empty(embed_dim, self.vdim, dtype=dtype))
            self.register_parameter("in_proj_weight", None)
        if bias:
            self.in_proj_bias = Parameter(C.empty(3 * embed_dim, dtype=dtype))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = NonDynamicallyQuantizableLinear(embed_dim, embed_dim, bias=bias, dtype=dtype)
        if add_bias_kv:
            self.bias_k = Parameter(C.empty(1, 1, embed_dim, dtype=dtype))
            self.bias_v = Parameter(C.empty(1, 1, embed_dim, dtype=dtype))
        else:
            self.bias_k = self.bias_v = None
        self.add_zero_attn = add_zero_attn
        self._reset_parameters()

    def _reset_parameters(self):
        if self._qkv_same_embed_dim:
            init.xavier_uniform_(self.in_proj_weight)
        else:
            init.xavier_uniform_(self.q_proj_weight)
            init.xavier_uniform_(self.k_proj_weight)
            init.xavier_uniform_(self.v_proj_weight)
        if self.in_proj_bias is not None:
            init.constant_(self.in_proj_bias, 0.0)
            init.constant_(self.out_proj.bias, 0.0)
        if self.bias_k is not None:
            init.xavier_normal_(self.bias_k)
        if self.bias_v is not None:
            init.xavier_normal_(self.bias_v)

    def forward(self, query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
                average_attn_weights=True, is_causal=False):
        if query.ndim not in (2, 3):
            raise AssertionError(f"query should be unbatched 2D or batched 3D tensor but received {query.ndim}-D "
                                 f"query tensor")
        if self.batch_first and query.ndim == 3:
            query, key, value = (O.transpose(t, 0, 1) for t in (query, key, value))
        out, w = multi_head_attention_forward(
            query, key, value, self.embed_dim, self.num_heads, self.in_proj_weight, self.in_proj_bias, self.bias_k,
            self.bias_v, self.add_zero_attn, self.dropout, self.out_proj.weight, self.out_proj.bias,
            training=self.training, key_padding_mask=key_padding_mask, need_weights=need_weights,
            attn_mask=attn_mask, use_separate_proj_weight=not self._qkv_same_embed_dim,
            q_proj_weight=self.q_proj_weight, k_proj_weight=self.k_proj_weight, v_proj_weight=self.v_proj_weight,
            average_attn_weights=average_attn_weights, is_causal=is_causal)
        if self.batch_first and query.ndim == 3:
            out = O.transpose(out, 0, 1)
        return out, w


def _activation(name):
    if callable(name):
        return name
    if name == "relu":
        return F.relu
    if name == "gelu":
        return F.gelu
    raise RuntimeError(f"activation should be relu/gelu, not {name}")


class TransformerEncoderLayer(Module):
    """Self-attention then a feed-forward block, each with dropout, a residual and LayerNorm
    (after each block, or before it with norm_first=True)."""

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation="relu", layer_norm_eps=1e-5,
                 batch_first=False, norm_first=False, bias=True, device=None, dtype=None):
        super().__init__()
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias, batch_first=batch_first,
                                            dtype=dtype)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, dtype=dtype)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, dtype=dtype)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.activation = _activation(activation)

    def forward(self, src, src_mask=None, src_key_padding_mask=None, is_causal=False):
        x = src
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), src_mask, src_key_padding_mask, is_causal)
            x = x + self._ff_block(self.norm2(x))
        else:
            x = self.norm1(x + self._sa_block(x, src_mask, src_key_padding_mask, is_causal))
            x = self.norm2(x + self._ff_block(x))
        return x

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal):
        x = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask, need_weights=False,
                           is_causal=is_causal)[0]
        return self.dropout1(x)

    def _ff_block(self, x):
        return self.dropout2(self.linear2(self.dropout(self.activation(self.linear1(x)))))


class TransformerEncoder(Module):
    """num_layers copies of encoder_layer, then an optional norm."""

    def __init__(self, encoder_layer, num_layers, norm=None, enable_nested_tensor=True, mask_check=True):
        super().__init__()
        self.layers = ModuleList([copy.deepcopy(encoder_layer) for _ in range(num_layers)])
        self.num_layers = num_layers
        self.norm = norm

    def forward(self, src, mask=None, src_key_padding_mask=None, is_causal=None):
        out = src
        for mod in self.layers:
            out = mod(out, src_mask=mask, src_key_padding_mask=src_key_padding_mask, is_causal=bool(is_causal))
        if self.norm is not None:
            out = self.norm(out)
        return out


class TransformerDecoderLayer(Module):
    """Self-attention over the target, attention over the encoder's output (memory), then a
    feed-forward block; each with dropout, a residual and LayerNorm (after, or before with
    norm_first=True)."""

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation="relu", layer_norm_eps=1e-5,
                 batch_first=False, norm_first=False, bias=True, device=None, dtype=None):
        super().__init__()
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias, batch_first=batch_first,
                                            dtype=dtype)
        self.multihead_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias, batch_first=batch_first,
                                                 dtype=dtype)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, dtype=dtype)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, dtype=dtype)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype)
        self.norm3 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.dropout3 = Dropout(dropout)
        self.activation = _activation(activation)

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=False, memory_is_causal=False):
        x = tgt
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), tgt_mask, tgt_key_padding_mask, tgt_is_causal)
            x = x + self._mha_block(self.norm2(x), memory, memory_mask, memory_key_padding_mask, memory_is_causal)
            x = x + self._ff_block(self.norm3(x))
        else:
            x = self.norm1(x + self._sa_block(x, tgt_mask, tgt_key_padding_mask, tgt_is_causal))
            x = self.norm2(x + self._mha_block(x, memory, memory_mask, memory_key_padding_mask, memory_is_causal))
            x = self.norm3(x + self._ff_block(x))
        return x

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal):
        x = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask, need_weights=False,
                           is_causal=is_causal)[0]
        return self.dropout1(x)

    def _mha_block(self, x, mem, attn_mask, key_padding_mask, is_causal):
        x = self.multihead_attn(x, mem, mem, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                                need_weights=False, is_causal=is_causal)[0]
        return self.dropout2(x)

    def _ff_block(self, x):
        return self.dropout3(self.linear2(self.dropout(self.activation(self.linear1(x)))))


class TransformerDecoder(Module):
    """num_layers copies of decoder_layer, then an optional norm."""

    def __init__(self, decoder_layer, num_layers, norm=None):
        super().__init__()
        self.layers = ModuleList([copy.deepcopy(decoder_layer) for _ in range(num_layers)])
        self.num_layers = num_layers
        self.norm = norm

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=None, memory_is_causal=False):
        out = tgt
        for mod in self.layers:
            out = mod(out, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                      tgt_key_padding_mask=tgt_key_padding_mask, memory_key_padding_mask=memory_key_padding_mask,
                      tgt_is_causal=bool(tgt_is_causal), memory_is_causal=memory_is_causal)
        if self.norm is not None:
            out = self.norm(out)
        return out


class Transformer(Module):
    """The encoder-decoder model of "Attention is all you need": a TransformerEncoder and a
    TransformerDecoder, each ending in a LayerNorm; weights xavier-uniform, as torch's."""

    def __init__(self, d_model=512, nhead=8, num_encoder_layers=6, num_decoder_layers=6, dim_feedforward=2048,
                 dropout=0.1, activation="relu", custom_encoder=None, custom_decoder=None, layer_norm_eps=1e-5,
                 batch_first=False, norm_first=False, bias=True, device=None, dtype=None):
        super().__init__()
        if custom_encoder is not None:
            self.encoder = custom_encoder
        else:
            layer = TransformerEncoderLayer(d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps,
                                            batch_first, norm_first, bias, dtype=dtype)
            self.encoder = TransformerEncoder(layer, num_encoder_layers,
                                              LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype))
        if custom_decoder is not None:
            self.decoder = custom_decoder
        else:
            layer = TransformerDecoderLayer(d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps,
                                            batch_first, norm_first, bias, dtype=dtype)
            self.decoder = TransformerDecoder(layer, num_decoder_layers,
                                              LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype))
        for p in self.parameters():
            if p.dim() > 1:
                init.xavier_uniform_(p)
        self.d_model, self.nhead, self.batch_first = d_model, nhead, batch_first

    def forward(self, src, tgt, src_mask=None, tgt_mask=None, memory_mask=None, src_key_padding_mask=None,
                tgt_key_padding_mask=None, memory_key_padding_mask=None, src_is_causal=None, tgt_is_causal=None,
                memory_is_causal=False):
        is_batched = src.dim() == 3
        if (not self.batch_first and src.size(1) != tgt.size(1) and is_batched) or \
                (self.batch_first and src.size(0) != tgt.size(0) and is_batched):
            raise RuntimeError("the batch number of src and tgt must be equal")
        if src.size(-1) != self.d_model or tgt.size(-1) != self.d_model:
            raise RuntimeError("the feature number of src and tgt must be equal to d_model")
        memory = self.encoder(src, mask=src_mask, src_key_padding_mask=src_key_padding_mask, is_causal=src_is_causal)
        return self.decoder(tgt, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                            tgt_key_padding_mask=tgt_key_padding_mask,
                            memory_key_padding_mask=memory_key_padding_mask, tgt_is_causal=tgt_is_causal,
                            memory_is_causal=memory_is_causal)

    @staticmethod
    def generate_square_subsequent_mask(sz, device=None, dtype=None):
        """A float (sz, sz) mask: 0 on and below the diagonal, -inf above it (a position sees only
        itself and earlier ones)."""
        dt = dtype or C._creation_dtype(None)
        return O.triu(C.full((sz, sz), float("-inf"), dtype=dt), diagonal=1)
