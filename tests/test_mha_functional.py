"""nn.functional.multi_head_attention_forward and MultiheadAttention's add_bias_kv,
add_zero_attn, static keys and values, against torch (float64, weights copied): outputs,
attention weights and gradients of every input and parameter, with masks of each kind."""
import numpy as np
import pytest
import torch

import tracegrad as tg

E, H, L, S, N = 8, 2, 5, 6, 3


def _config(seed):
    r = np.random.default_rng(seed)
    c = dict(batched=bool(r.random() < 0.8), separate=bool(r.random() < 0.3), bias=bool(r.random() < 0.8),
             bias_kv=bool(r.random() < 0.4), zero_attn=bool(r.random() < 0.4), need_weights=bool(r.random() < 0.6),
             average=bool(r.random() < 0.5), mask=str(r.choice(["none", "bool2", "float2", "float3", "bool3"])),
             kpm=str(r.choice(["none", "bool", "float"])), static=bool(r.random() < 0.25), self_attn=bool(r.random() < 0.3))
    if c["static"]:
        c["bias_kv"] = False
    if not c["batched"]:
        c["mask"] = "none" if c["mask"].endswith("3") else c["mask"]
    kd = E if not c["separate"] else 5
    arr = lambda *s: r.standard_normal(s)          # noqa: E731
    n = N if c["batched"] else 1
    shp = lambda t: (t, N, E) if c["batched"] else (t, E)    # noqa: E731
    c["q"] = arr(*shp(L))
    c["k"] = arr(*((S, N, kd) if c["batched"] else (S, kd)))
    c["v"] = arr(*((S, N, kd) if c["batched"] else (S, kd)))
    c["w_in"] = arr(3 * E, E)
    c["wq"], c["wk"], c["wv"] = arr(E, E), arr(E, kd), arr(E, kd)
    c["b_in"], c["w_out"], c["b_out"] = arr(3 * E), arr(E, E), arr(E)
    c["bias_k"], c["bias_v"] = arr(1, 1, E), arr(1, 1, E)
    s_kv = L if c["self_attn"] and not c["separate"] else S    # (the keys' length: masks are checked against it)
    c["static_k"], c["static_v"] = arr(n * H, s_kv, E // H), arr(n * H, s_kv, E // H)
    s_total = s_kv
    c["mask_arr"] = {"none": None, "bool2": r.random((L, s_total)) < 0.3, "float2": arr(L, s_total),
                     "float3": arr(n * H, L, s_total), "bool3": r.random((n * H, L, s_total)) < 0.3}[c["mask"]]
    c["kpm_arr"] = {"none": None, "bool": r.random((n, s_total)) < 0.3, "float": arr(n, s_total)}[c["kpm"]]
    if not c["batched"] and c["kpm_arr"] is not None:
        c["kpm_arr"] = c["kpm_arr"][0]
    return c


def _run(Lib, c):
    t = lambda a, g=True: None if a is None else Lib.tensor(a, requires_grad=g and a.dtype != bool)   # noqa: E731
    q = t(c["q"])
    k = q if c["self_attn"] and not c["separate"] else t(c["k"])
    v = k if c["self_attn"] and not c["separate"] else t(c["v"])
    params = dict(in_proj_weight=None if c["separate"] else t(c["w_in"]), in_proj_bias=t(c["b_in"]) if c["bias"] else None,
                  bias_k=t(c["bias_k"]) if c["bias_kv"] else None, bias_v=t(c["bias_v"]) if c["bias_kv"] else None,
                  out_proj_weight=t(c["w_out"]), out_proj_bias=t(c["b_out"]) if c["bias"] else None,
                  q_proj_weight=t(c["wq"]) if c["separate"] else None, k_proj_weight=t(c["wk"]) if c["separate"] else None,
                  v_proj_weight=t(c["wv"]) if c["separate"] else None,
                  static_k=t(c["static_k"]) if c["static"] else None, static_v=t(c["static_v"]) if c["static"] else None)
    out, w = Lib.nn.functional.multi_head_attention_forward(
        q, k, v, E, H, params["in_proj_weight"], params["in_proj_bias"], params["bias_k"], params["bias_v"],
        c["zero_attn"], 0.0, params["out_proj_weight"], params["out_proj_bias"], training=True,
        key_padding_mask=t(c["kpm_arr"], False), need_weights=c["need_weights"], attn_mask=t(c["mask_arr"], False),
        use_separate_proj_weight=c["separate"], q_proj_weight=params["q_proj_weight"],
        k_proj_weight=params["k_proj_weight"], v_proj_weight=params["v_proj_weight"], static_k=params["static_k"],
        static_v=params["static_v"], average_attn_weights=c["average"])
    finite = Lib.nan_to_num(out, nan=0.0)
    loss = (finite * finite.detach().cos()).sum()
    if w is not None:
        loss = loss + Lib.nan_to_num(w, nan=0.0).sin().sum()
    leaves = [x for x in [q, k, v] + list(params.values()) if x is not None and x.requires_grad]
    leaves = list({id(x): x for x in leaves}.values())
    grads = Lib.autograd.grad(loss, leaves, allow_unused=True)
    return [out.detach().numpy(), None if w is None else w.detach().numpy()] + \
        [None if g is None else g.numpy() for g in grads]


@pytest.mark.filterwarnings("ignore:Support for mismatched")
@pytest.mark.parametrize("seed", range(150))
def test_multi_head_attention_forward_matches_torch(seed):
    c = _config(seed)
    want, got = _run(torch, c), _run(tg, c)
    assert len(want) == len(got)
    for w, g in zip(want, got):
        assert (w is None) == (g is None)
        if w is not None:
            np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12, equal_nan=True)


@pytest.mark.parametrize("bias_kv,zero_attn,batch_first", [(True, False, False), (False, True, True), (True, True, False)])
def test_module_with_bias_kv_and_zero_attn_matches_torch(bias_kv, zero_attn, batch_first):
    torch.manual_seed(0)
    tm = torch.nn.MultiheadAttention(E, H, add_bias_kv=bias_kv, add_zero_attn=zero_attn, batch_first=batch_first,
                                     kdim=6, vdim=7).double()
    gm = tg.nn.MultiheadAttention(E, H, add_bias_kv=bias_kv, add_zero_attn=zero_attn, batch_first=batch_first,
                                  kdim=6, vdim=7).double()
    assert list(tm.state_dict()) == list(gm.state_dict())
    gm.load_state_dict({k: tg.tensor(v.numpy()) for k, v in tm.state_dict().items()})
    r = np.random.default_rng(1)
    dims = (N, L) if batch_first else (L, N)
    q, k, v = r.standard_normal(dims + (E,)), r.standard_normal(dims[:1] + (S,) + (6,) if batch_first else (S, N, 6)), \
        r.standard_normal((N, S, 7) if batch_first else (S, N, 7))
    res = []
    for Lib, m in ((torch, tm), (tg, gm)):
        out, w = m(Lib.tensor(q), Lib.tensor(k), Lib.tensor(v), key_padding_mask=Lib.tensor(r.random((N, S)) < 0.2))
        (out.sum() + w.sum()).backward()
        res.append([out.detach().numpy(), w.detach().numpy()] + [p.grad.numpy() for p in m.parameters()])
        r = np.random.default_rng(1)
        r.standard_normal(dims + (E,)), r.standard_normal((S, N, 6)), r.standard_normal((S, N, 7))
    for g, w in zip(res[1], res[0]):
        np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12, equal_nan=True)
    assert repr(gm) == repr(tm)


ERRORS = [
    dict(embed_dim_to_check=7), dict(num_heads=3), dict(static_k="k", bias_k="b"), dict(bias_k="b", bias_v=None),
    dict(attn_mask=(2, 2)), dict(attn_mask=(1, 1, 1, 1)), dict(static_k=(5, 6, 4)), dict(static_k=(6, 6, 3)),
    dict(is_causal=True),
]


@pytest.mark.parametrize("case", range(len(ERRORS)))
def test_errors_as_torch(case):
    r = np.random.default_rng(2)
    base = dict(q=r.standard_normal((L, N, E)), kv=r.standard_normal((S, N, E)), w=r.standard_normal((3 * E, E)),
                wo=r.standard_normal((E, E)), b=r.standard_normal((1, 1, E)), sk=r.standard_normal((N * H, 6, E // H)))
    msgs = []
    for Lib in (torch, tg):
        t = lambda a: Lib.tensor(a)              # noqa: E731
        kw = dict(embed_dim_to_check=E, num_heads=H, bias_k=None, bias_v=None, static_k=None, attn_mask=None,
                  is_causal=False)
        for k_, v_ in ERRORS[case].items():
            kw[k_] = v_
        for name in ("bias_k", "bias_v"):
            if kw[name] == "b":
                kw[name] = t(base["b"])
        if kw["static_k"] == "k":
            kw["static_k"] = t(base["sk"])
        elif isinstance(kw["static_k"], tuple):
            kw["static_k"] = Lib.zeros(*kw["static_k"], dtype=Lib.float64)
        if isinstance(kw["attn_mask"], tuple):
            kw["attn_mask"] = Lib.zeros(*kw["attn_mask"], dtype=Lib.float64)
        with pytest.raises((AssertionError, RuntimeError)) as e:
            Lib.nn.functional.multi_head_attention_forward(
                t(base["q"]), t(base["kv"]), t(base["kv"]), kw["embed_dim_to_check"], kw["num_heads"], t(base["w"]),
                None, kw["bias_k"], kw["bias_v"], False, 0.0, t(base["wo"]), None, attn_mask=kw["attn_mask"],
                static_k=kw["static_k"], is_causal=kw["is_causal"])
        msgs.append((type(e.value).__name__, str(e.value)))
    assert msgs[0] == msgs[1]


def test_mismatched_mask_types_warn_as_torch():
    r = np.random.default_rng(3)
    q = r.standard_normal((L, N, E))
    msgs = []
    for Lib in (torch, tg):
        with pytest.warns(UserWarning) as rec:
            Lib.nn.functional.multi_head_attention_forward(
                Lib.tensor(q), Lib.tensor(q), Lib.tensor(q), E, H, Lib.tensor(r.standard_normal((3 * E, E))), None,
                None, None, False, 0.0, Lib.tensor(r.standard_normal((E, E))), None,
                key_padding_mask=Lib.zeros(N, L, dtype=Lib.bool), attn_mask=Lib.zeros(L, L))
        msgs.append(sorted({str(w.message) for w in rec}))
    assert msgs[0] == msgs[1]
