"""Plain float64 references written from the equations, for the tests only.

Every pair (query, key) is handled explicitly: no separable tables, no folding, no fused kernels.
"""
import math

import torch
import torch.nn.functional as F


def sinusoid(offsets: torch.Tensor, dim: int, wave_length: float) -> torch.Tensor:
    """[sin(o f_0..f_{n-1}), cos(o f_0..f_{n-1})][:dim], f_k = wave_length^(-k/n), n = ceil(dim/2)."""
    n = math.ceil(dim / 2)
    freqs = torch.tensor([wave_length ** (-k / n) for k in range(n)], dtype=torch.float64)
    ang = offsets.to(torch.float64)[..., None] * freqs
    return torch.cat([ang.sin(), ang.cos()], -1)[..., :dim]


def sgd_without_gradient(start: float, lrs: list[float], momentum: float, weight_decay: float) -> float:
    """Where SGD with momentum and weight decay takes a parameter whose loss gradient is always 0, one step
    per learning rate: ``b_t = momentum b_{t-1} + weight_decay p_t`` (``b_0 = weight_decay p_0``),
    ``p_{t+1} = p_t - lr_t b_t``."""
    p, buffer = float(start), 0.0
    for lr in lrs:
        buffer = momentum * buffer + weight_decay * p
        p -= lr * buffer
    return p


def attention_weights(logits: torch.Tensor, hard: int) -> torch.Tensor:
    """Softmax over the last axis, or (``hard`` > 0) the mean over the ``hard`` visible keys of highest logit."""
    if not hard:
        return logits.softmax(-1)
    order = logits.argsort(-1, descending=True)[..., :hard]
    picked = torch.zeros_like(logits).scatter(-1, order, 1.0) * logits.isfinite()
    return picked / picked.sum(-1, keepdim=True)


def generalized_attention_2d(m, x: torch.Tensor) -> torch.Tensor:
    """Reference forward of ``attnbench.attention.GeneralizedAttention`` (its parameters, float64)."""
    p = params64(m)
    x = x.to(torch.float64)
    e1, e2, e3, e4 = m.factors.bits
    heads, d = m.num_heads, m.qk_embed_dim
    qs, ks = m.q_stride, m.kv_stride
    xq, xk = x[:, :, ::qs, ::qs], x[:, :, ::ks, ::ks]
    n, _, h, w = xq.shape
    hk, wk = xk.shape[2:]
    # pixel coordinates of every query and key
    qy, qx = [t.reshape(-1) * qs for t in torch.meshgrid(torch.arange(h), torch.arange(w), indexing="ij")]
    ky, kx = [t.reshape(-1) * ks for t in torch.meshgrid(torch.arange(hk), torch.arange(wk), indexing="ij")]

    def conv(name, inp):  # 1x1 conv -> (n, heads, pixels, d)
        y = torch.einsum("oc,nchw->nohw", p[name + ".weight"][:, :, 0, 0], inp)
        return y.reshape(n, heads, d, -1).transpose(2, 3)

    logits = torch.zeros(n, heads, h * w, hk * wk, dtype=torch.float64)
    q = conv("query_conv", xq) if (e1 or e2) else None
    k = conv("key_conv", xk) if (e1 or e3) else None
    v = conv("value_conv", xk)
    if e2 or e4:
        dx = (qx[:, None] - kx[None, :]) * m.position_magnitude  # (L, M), query minus key
        dy = (qy[:, None] - ky[None, :]) * m.position_magnitude
        half = m.position_embedding_dim // 2
        px = sinusoid(dx, half, 1000.0) @ p["appr_geom_fc_x.weight"].T / math.sqrt(2)
        py = sinusoid(dy, half, 1000.0) @ p["appr_geom_fc_y.weight"].T / math.sqrt(2)
        rel = (px + py).reshape(h * w, hk * wk, heads, d)  # (L, M, heads, d)
    if e1 and m.score in ("dot", "scaled_dot"):
        logits += torch.einsum("nhld,nhmd->nhlm", q, k) / (math.sqrt(d) if m.score == "scaled_dot" else 1)
    if e1 and m.score == "bilinear":
        logits += torch.einsum("nhld,hde,nhme->nhlm", q, p["score_weight"], k)
    if e1 and m.score == "additive":
        logits += torch.einsum("nhlmd,hd->nhlm", torch.tanh(q[:, :, :, None] + k[:, :, None]), p["score_vector"][..., 0])
    if e2:
        logits += torch.einsum("nhld,lmhd->nhlm", q, rel)
    if e3:
        logits += torch.einsum("hd,nhmd->nhm", p["appr_bias"].view(heads, d), k)[:, :, None, :]
    if e4:
        logits += torch.einsum("hd,lmhd->hlm", p["geom_bias"].view(heads, d), rel)[None]
    if m.spatial_range >= 0:
        far = ((qy[:, None] - ky[None, :]).abs() > m.spatial_range) | (
            (qx[:, None] - kx[None, :]).abs() > m.spatial_range)
        logits = logits.masked_fill(far, float("-inf"))
    out = attention_weights(logits, m.hard) @ v  # (n, heads, L, d)
    out = out.transpose(2, 3).reshape(n, heads * d, h, w)
    out = torch.einsum("oc,nchw->nohw", p["proj_conv.weight"][:, :, 0, 0], out)
    out = out + p["proj_conv.bias"][None, :, None, None]
    if out.shape[2:] != x.shape[2:]:
        out = F.interpolate(out, size=x.shape[2:], mode="bilinear", align_corners=False)
    return p["gamma"] * out + x


def generalized_attention_1d(m, query, memory=None, causal=False, key_padding_mask=None, query_offset=0):
    """Reference forward of ``attnbench.attention.GeneralizedAttention1d`` (float64)."""
    p = params64(m)
    query = query.to(torch.float64)
    keys_in = query if memory is None else memory.to(torch.float64)
    e1, e2, e3, e4 = m.factors.bits
    heads, d = m.num_heads, m.head_dim
    b, t, _ = query.shape
    s = keys_in.shape[1]

    def lin(name, inp):
        y = inp @ p[name + ".weight"].T + p[name + ".bias"]
        return y.view(b, -1, heads, d).transpose(1, 2)

    q = lin("q_proj", query) if (e1 or e2) else None
    k = lin("k_proj", keys_in) if (e1 or e3) else None
    v = lin("v_proj", keys_in)
    logits = torch.zeros(b, heads, t, s, dtype=torch.float64)
    if e2 or e4:
        offsets = torch.arange(s)[None, :] - (torch.arange(t)[:, None] + query_offset)  # key - query
        rel = (sinusoid(offsets, m.position_dim, m.wave_length) @ p["pos_proj.weight"].T).view(t, s, heads, d)
    if e1 and m.score in ("scaled_dot", "dot"):
        logits += torch.einsum("bhtd,bhsd->bhts", q, k) * (math.sqrt(d) if m.score == "dot" else 1)
    if e1 and m.score == "bilinear":
        logits += torch.einsum("bhtd,hde,bhse->bhts", q, p["score_weight"], k)
    if e1 and m.score == "additive":  # w . tanh(q_i + k_j), at no 1/sqrt(d) scale
        logits += torch.einsum("bhtsd,hd->bhts", torch.tanh(q[:, :, :, None] + k[:, :, None]),
                               p["score_vector"][..., 0]) * math.sqrt(d)
    if e2:
        logits += torch.einsum("bhtd,tshd->bhts", q, rel)
    if e3:
        logits += torch.einsum("hd,bhsd->bhs", p["content_bias"], k)[:, :, None]
    if e4:
        logits += torch.einsum("hd,tshd->hts", p["position_bias"], rel)[None]
    logits = logits / math.sqrt(d)
    if causal:
        future = torch.arange(s)[None, :] > torch.arange(t)[:, None] + query_offset
        logits = logits.masked_fill(future, float("-inf"))
    if m.window >= 0:
        outside = (torch.arange(s)[None, :] - torch.arange(t)[:, None] - query_offset).abs() > m.window
        logits = logits.masked_fill(outside, float("-inf"))
    if key_padding_mask is not None:
        logits = logits.masked_fill(key_padding_mask[:, None, None, :], float("-inf"))
    weights = attention_weights(logits, m.hard).nan_to_num(0.0)  # a query that sees no key attends to nothing
    out = (weights @ v).transpose(1, 2).reshape(b, t, heads * d)
    return out @ p["out_proj.weight"].T + p["out_proj.bias"]


def randomize(m):
    """Draw every parameter from N(0, 0.5^2), in place; returns the module."""
    with torch.no_grad():
        for p in m.parameters():
            p.normal_(std=0.5)  # away from init (zero last layers included) so every term shows
    return m


def padding(lengths, total):
    """(batch, total) key padding mask: True at the steps past each sequence's length."""
    return torch.arange(total)[None, :] >= torch.tensor(lengths)[:, None]


def params64(m):
    """The module's state dict in float64."""
    return {k: v.detach().to(torch.float64) for k, v in m.state_dict().items()}


def fc(p, name, v):
    """1x1 conv on a (N, C) vector."""
    return v @ p[name + ".weight"][:, :, 0, 0].T + p[name + ".bias"]
