"""Attention maps per term: each term's weights against a softmax written from the equations in
float64, 'all' against forward, chosen queries against all, and no effect on forward."""
import math

import pytest
import torch
import torch.nn.functional as F
from torchvision.ops import deform_conv2d

from attnbench.attention import (
    ALL_FACTORS, AttentionFactors, DeformConv2d, DynamicConv1d, DynamicConv2d, GeneralizedAttention,
    GeneralizedAttention1d, LightweightConv1d, ModulatedDeformConv2d)
from attnbench.attention.attention_maps import enabled_terms
from reference import attention_weights, padding, params64, randomize, sinusoid

pytestmark = pytest.mark.usefixtures("one_thread")


def masked_softmax(logits, hidden, hard=0):
    """Softmax (or hard weights) over keys with the ``hidden`` ones at -inf; zeros where all are hidden."""
    if hidden is not None:
        logits = logits.masked_fill(hidden, float("-inf"))
    return attention_weights(logits, hard).nan_to_num(0.0)


def check_maps(maps, terms, hidden, hard=0):
    """Each term's weights and 'all' (the sum of the terms' logits) against the hand-computed softmax."""
    assert set(maps.weights) == {"all", *terms}
    for name, logits in terms.items():
        torch.testing.assert_close(maps.weights[name], masked_softmax(logits, hidden), rtol=1e-10, atol=1e-10)
    expected = masked_softmax(sum(terms.values()), hidden, hard)
    torch.testing.assert_close(maps.weights["all"], expected, rtol=1e-10, atol=1e-10)


# --- generalized attention, 2D ------------------------------------------------------------------

def make_2d(factors, **kwargs):
    return randomize(GeneralizedAttention(8, num_heads=2, attention_type=factors, **kwargs)).double()


def heads_2d(p, name, x):
    """1x1 conv ``name`` of (N, C, h, w) into (N, heads=2, h * w, d)."""
    y = torch.einsum("oc,nchw->nohw", p[name + ".weight"][:, :, 0, 0], x)
    return y.reshape(x.shape[0], 2, -1, x.shape[2] * x.shape[3]).transpose(2, 3)


def pixels(h, w, stride):
    """Row and column in input pixels of each point of an h x w grid of ``stride``, row-major."""
    ys, xs = torch.meshgrid(torch.arange(h), torch.arange(w), indexing="ij")
    return ys.reshape(-1) * stride, xs.reshape(-1) * stride


def terms_2d(m, x):
    """Each enabled term's logits for every (query, key) pair, (N, heads, L, M), and the keys beyond
    ``spatial_range`` (L, M) or None, from the module docstring's equation."""
    p = params64(m)
    heads, d = m.num_heads, m.qk_embed_dim
    xq, xk = x[:, :, ::m.q_stride, ::m.q_stride], x[:, :, ::m.kv_stride, ::m.kv_stride]
    n, _, h, w = xq.shape
    qy, qx = pixels(h, w, m.q_stride)
    ky, kx = pixels(*xk.shape[2:], m.kv_stride)
    e1, e2, e3, e4 = m.factors.bits
    q = heads_2d(p, "query_conv", xq) if e1 or e2 else None
    k = heads_2d(p, "key_conv", xk) if e1 or e3 else None
    terms = {}
    if e1 and m.score == "dot":
        terms["E1"] = torch.einsum("nhld,nhmd->nhlm", q, k)
    if e1 and m.score == "bilinear":
        terms["E1"] = torch.einsum("nhld,hde,nhme->nhlm", q, p["score_weight"], k)
    if e1 and m.score == "additive":
        terms["E1"] = torch.einsum("nhlmd,hd->nhlm", torch.tanh(q[:, :, :, None] + k[:, :, None]),
                                   p["score_vector"][..., 0])
    if e2 or e4:
        def embed(offsets, fc):  # P_o = W emb(o * magnitude) / sqrt(2), (L, M, C)
            emb = sinusoid(offsets * m.position_magnitude, m.position_embedding_dim // 2, 1000.0)
            return emb @ p[fc + ".weight"].T / math.sqrt(2)
        rel = embed(qx[:, None] - kx[None, :], "appr_geom_fc_x") + embed(qy[:, None] - ky[None, :], "appr_geom_fc_y")
        rel = rel.reshape(h * w, -1, heads, d)
    if e2:
        terms["E2"] = torch.einsum("nhld,lmhd->nhlm", q, rel)
    if e3:
        terms["E3"] = torch.einsum("hd,nhmd->nhm", p["appr_bias"].view(heads, d), k)[:, :, None].expand(
            -1, -1, h * w, -1)
    if e4:
        terms["E4"] = torch.einsum("hd,lmhd->hlm", p["geom_bias"].view(heads, d), rel).expand(n, -1, -1, -1)
    far = None
    if m.spatial_range >= 0:
        far = (((qy[:, None] - ky[None, :]).abs() > m.spatial_range)
               | ((qx[:, None] - kx[None, :]).abs() > m.spatial_range))
    return terms, far


def forward_2d_from(m, x, weights):
    """``x + gamma W_out [weights @ W_v x_kv]_heads`` (q_stride 1: no upsampling)."""
    p = params64(m)
    n, c, h, w = x.shape
    value = heads_2d(p, "value_conv", x[:, :, ::m.kv_stride, ::m.kv_stride])
    out = (weights @ value).transpose(2, 3).reshape(n, c, h, w)
    out = torch.einsum("oc,nchw->nohw", p["proj_conv.weight"][:, :, 0, 0], out) + p["proj_conv.bias"][:, None, None]
    return p["gamma"] * out + x


RANGES_2D = [(-1, 1), (-1, 2), (1, 1), (1, 2)]  # (spatial_range, kv_stride)


@pytest.mark.parametrize("factors", ALL_FACTORS)
@pytest.mark.parametrize("spatial_range,kv_stride", RANGES_2D)
def test_2d_terms_match_hand_softmax(factors, spatial_range, kv_stride):
    m = make_2d(factors, spatial_range=spatial_range, kv_stride=kv_stride, position_magnitude=2)
    x = torch.randn(2, 8, 5, 6, dtype=torch.float64)
    maps = m.attention_maps(x)
    assert maps.query_grid == (5, 6) and maps.key_grid == (-(-5 // kv_stride), -(-6 // kv_stride))
    check_maps(maps, *terms_2d(m, x))


@pytest.mark.parametrize("factors", ALL_FACTORS)
@pytest.mark.parametrize("spatial_range,kv_stride", RANGES_2D)
def test_2d_all_reproduces_forward(factors, spatial_range, kv_stride):
    m = make_2d(factors, spatial_range=spatial_range, kv_stride=kv_stride)
    x = torch.randn(2, 8, 5, 6, dtype=torch.float64)
    weights = m.attention_maps(x).weights["all"]
    torch.testing.assert_close(forward_2d_from(m, x, weights), m(x), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("factors", ["1000", "1010", "1111"])
@pytest.mark.parametrize("score", ["bilinear", "additive"])
def test_2d_scores(factors, score):
    m = make_2d(factors, kv_stride=2, score=score)
    x = torch.randn(2, 8, 5, 6, dtype=torch.float64)
    maps = m.attention_maps(x)
    check_maps(maps, *terms_2d(m, x))
    torch.testing.assert_close(forward_2d_from(m, x, maps.weights["all"]), m(x), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("factors,spatial_range", [
    ("1111", -1), ("1111", 1), ("0110", -1), ("0110", 1), ("0001", -1), ("0001", 1), ("0010", 1),
    ("0010", -1)])  # E3 alone, hard: one logit row shared by every query
def test_2d_hard_all_is_what_forward_uses(factors, spatial_range):
    m = make_2d(factors, kv_stride=1, spatial_range=spatial_range, hard=2)
    x = torch.randn(2, 8, 5, 6, dtype=torch.float64)
    maps = m.attention_maps(x)
    check_maps(maps, *terms_2d(m, x), hard=2)
    assert ((maps.weights["all"] > 0).sum(-1) == 2).all()
    torch.testing.assert_close(forward_2d_from(m, x, maps.weights["all"]), m(x), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("factors", ["1111", "0100", "0010", "0001"])
@pytest.mark.parametrize("q_stride,kv_stride,spatial_range", [(1, 2, -1), (2, 1, 2), (2, 3, 4)])
def test_2d_chosen_queries_are_rows_of_all(factors, q_stride, kv_stride, spatial_range):
    m = make_2d(factors, q_stride=q_stride, kv_stride=kv_stride, spatial_range=spatial_range)
    x = torch.randn(2, 8, 5, 6, dtype=torch.float64)
    every = m.attention_maps(x)
    h, w = every.query_grid
    assert (h, w) == (-(-5 // q_stride), -(-6 // q_stride))
    queries = torch.tensor([h * w - 1, 0, w + 1, 0])
    chosen = m.attention_maps(x, queries)
    assert (chosen.query_grid, chosen.key_grid) == (every.query_grid, every.key_grid)
    for name, weights in every.weights.items():
        torch.testing.assert_close(chosen.weights[name], weights[:, :, queries], rtol=1e-12, atol=1e-12)
    if q_stride > 1:  # the query grid of stride q_stride: its terms against the equations too
        check_maps(every, *terms_2d(m, x))


# --- generalized attention, 1D ------------------------------------------------------------------

def make_1d(factors, **kwargs):
    return randomize(GeneralizedAttention1d(8, 2, factors, position_dim=6, **kwargs)).double()


def terms_1d(m, query, memory=None, causal=False, key_padding_mask=None, query_offset=0):
    """Each enabled term's logits for every (query, key) pair, (B, heads, T, S), and the hidden keys
    (B, 1, T, S) or None, from the module docstring's equation."""
    p = params64(m)
    keys_in = query if memory is None else memory
    heads, d = m.num_heads, m.head_dim
    b, t, _ = query.shape
    s = keys_in.shape[1]

    def project(name, inp):
        return (inp @ p[name + ".weight"].T + p[name + ".bias"]).view(b, -1, heads, d).transpose(1, 2)

    e1, e2, e3, e4 = m.factors.bits
    q = project("q_proj", query) if e1 or e2 else None
    k = project("k_proj", keys_in) if e1 or e3 else None
    steps = torch.arange(t)[:, None] + query_offset  # t_i
    offsets = torch.arange(s)[None, :] - steps  # j - t_i
    terms = {}
    if e1 and m.score in ("scaled_dot", "dot"):
        terms["E1"] = torch.einsum("bhtd,bhsd->bhts", q, k) / (math.sqrt(d) if m.score == "scaled_dot" else 1)
    if e1 and m.score == "bilinear":
        terms["E1"] = torch.einsum("bhtd,hde,bhse->bhts", q, p["score_weight"], k) / math.sqrt(d)
    if e1 and m.score == "additive":
        terms["E1"] = torch.einsum("bhtsd,hd->bhts", torch.tanh(q[:, :, :, None] + k[:, :, None]),
                                   p["score_vector"][..., 0])
    if e2 or e4:
        rel = (sinusoid(offsets, m.position_dim, m.wave_length) @ p["pos_proj.weight"].T).view(t, s, heads, d)
    if e2:
        terms["E2"] = torch.einsum("bhtd,tshd->bhts", q, rel) / math.sqrt(d)
    if e3:
        content = torch.einsum("hd,bhsd->bhs", p["content_bias"], k)
        terms["E3"] = content[:, :, None].expand(-1, -1, t, -1) / math.sqrt(d)
    if e4:
        terms["E4"] = torch.einsum("hd,tshd->hts", p["position_bias"], rel).expand(b, -1, -1, -1) / math.sqrt(d)
    hidden = torch.zeros(b, 1, t, s, dtype=torch.bool)
    if causal:
        hidden |= offsets > 0
    if m.window >= 0:
        hidden |= offsets.abs() > m.window
    if key_padding_mask is not None:
        hidden |= key_padding_mask[:, None, None, :]
    return terms, hidden


def forward_1d_from(m, query, memory, weights):
    """``W_out [weights @ W_v x_keys]_heads``."""
    p = params64(m)
    keys_in = query if memory is None else memory
    b, t, c = query.shape
    value = (keys_in @ p["v_proj.weight"].T + p["v_proj.bias"]).view(b, -1, m.num_heads, m.head_dim).transpose(1, 2)
    out = (weights @ value).transpose(1, 2).reshape(b, t, c)
    return out @ p["out_proj.weight"].T + p["out_proj.bias"]


def inputs_1d(mode):
    """(query, forward's keyword arguments) for self-attention, cross-attention and incremental decoding."""
    x = torch.randn(2, 6, 8, dtype=torch.float64)
    if mode == "self":
        return x, dict(causal=True, key_padding_mask=padding([6, 4], 6))
    if mode == "cross":
        return x, dict(memory=torch.randn(2, 7, 8, dtype=torch.float64), key_padding_mask=padding([7, 3], 7))
    return x[:, 4:], dict(memory=x, causal=True, query_offset=4)  # the last 2 steps of a 6-step prefix


@pytest.mark.parametrize("factors", ALL_FACTORS)
@pytest.mark.parametrize("mode", ["self", "cross", "incremental"])
def test_1d_terms_match_hand_softmax(factors, mode):
    m = make_1d(factors)
    query, kwargs = inputs_1d(mode)
    maps = m.attention_maps(query, **kwargs)
    s = kwargs.get("memory", query).shape[1]
    assert maps.query_grid == (query.shape[1],) and maps.key_grid == (s,)
    check_maps(maps, *terms_1d(m, query, **kwargs))


@pytest.mark.parametrize("factors", ALL_FACTORS)
@pytest.mark.parametrize("mode", ["self", "cross", "incremental"])
def test_1d_all_reproduces_forward(factors, mode):
    m = make_1d(factors)
    query, kwargs = inputs_1d(mode)
    weights = m.attention_maps(query, **kwargs).weights["all"]
    torch.testing.assert_close(forward_1d_from(m, query, kwargs.get("memory"), weights), m(query, **kwargs),
                               rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("factors,score,hard", [
    ("1000", "dot", 0), ("1100", "bilinear", 0), ("1111", "additive", 0), ("1111", "scaled_dot", 2),
    ("0101", "scaled_dot", 2), ("1010", "bilinear", 1)])
def test_1d_scores_and_hard(factors, score, hard):
    m = make_1d(factors, score=score, hard=hard)
    query, kwargs = inputs_1d("cross")
    maps = m.attention_maps(query, **kwargs)
    check_maps(maps, *terms_1d(m, query, **kwargs), hard=hard)
    torch.testing.assert_close(forward_1d_from(m, query, kwargs["memory"], maps.weights["all"]),
                               m(query, **kwargs), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("factors", ["1111", "0110", "0001"])
def test_1d_window_and_queries_that_see_no_key(factors):
    """Window 1 around steps 4 and 5 of the second sequence holds padding only: zero weights, as forward."""
    m = make_1d(factors, window=1)
    query, kwargs = inputs_1d("cross")
    maps = m.attention_maps(query, **kwargs)
    assert (maps.weights["all"][1, :, 5] == 0).all()
    check_maps(maps, *terms_1d(m, query, **kwargs))
    torch.testing.assert_close(forward_1d_from(m, query, kwargs["memory"], maps.weights["all"]),
                               m(query, **kwargs), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("factors", ["1111", "0100", "0010"])
@pytest.mark.parametrize("mode", ["self", "incremental"])
def test_1d_chosen_queries_are_rows_of_all(factors, mode):
    m = make_1d(factors)
    query, kwargs = inputs_1d(mode)
    every = m.attention_maps(query, **kwargs)
    queries = torch.tensor([query.shape[1] - 1, 0, 0])
    chosen = m.attention_maps(query, **kwargs, queries=queries)
    for name, weights in every.weights.items():
        torch.testing.assert_close(chosen.weights[name], weights[:, :, queries], rtol=1e-12, atol=1e-12)


# --- deformable convolution ---------------------------------------------------------------------

# (N, C_in, H, W), C_out, kernel, stride, padding, dilation, deform_groups
CASES_DEFORM = [
    ((2, 8, 5, 6), 4, 3, 1, 1, 1, 1),
    ((1, 8, 5, 6), 6, (3, 2), (2, 1), (0, 1), (1, 2), 2),
]
DEFORMABLE = [DeformConv2d, ModulatedDeformConv2d]


def make_deform(cls, shape, c_out, kernel, stride, padding, dilation, deform_groups):
    return cls(shape[1], c_out, kernel, stride, padding, dilation, deform_groups=deform_groups, bias=True).double()


def regular_grid(m, h_out, w_out):
    """(y, x) of tap ``(i, j)`` at output ``(p_y, p_x)``: ``p s - pad + dil (i, j)``, (kh kw, 2, H_out W_out)."""
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = m.kernel_size, m.stride, m.padding, m.dilation
    grid = torch.empty(kh * kw, 2, h_out, w_out, dtype=torch.float64)
    for i in range(kh):
        for j in range(kw):
            grid[i * kw + j, 0] = (torch.arange(h_out) * sh - ph + dh * i)[:, None]
            grid[i * kw + j, 1] = (torch.arange(w_out) * sw - pw + dw * j)[None, :]
    return grid.flatten(2)


@pytest.mark.parametrize("cls", DEFORMABLE)
@pytest.mark.parametrize("case", CASES_DEFORM)
def test_deformable_sampling_without_offsets_is_the_regular_grid(cls, case):
    m = make_deform(cls, *case)  # the offset branch starts at zero
    x = torch.randn(case[0], dtype=torch.float64)
    sampling = m.sampling_locations(x)
    h_out, w_out = sampling.output_grid
    assert (h_out, w_out) == m.output_size(*x.shape[2:])
    grid = regular_grid(m, h_out, w_out).expand(x.shape[0], m.deform_groups, -1, -1, -1)
    assert torch.equal(sampling.locations, grid)
    assert torch.equal(sampling.modulation, torch.full_like(grid[:, :, :, 0], 0.5 if m.modulated else 1.0))


@pytest.mark.parametrize("cls", DEFORMABLE)
@pytest.mark.parametrize("case", CASES_DEFORM)
def test_deformable_sampling_moves_by_the_offsets(cls, case):
    """A constant offset branch (zero weight, a bias set by hand) moves every location by its bias."""
    m = make_deform(cls, *case)
    groups, taps = m.deform_groups, m.kernel_size[0] * m.kernel_size[1]
    with torch.no_grad():
        m.conv_offset.bias.normal_()
    bias = m.conv_offset.bias.detach()
    x = torch.randn(case[0], dtype=torch.float64)
    sampling = m.sampling_locations(x)
    grid = regular_grid(m, *sampling.output_grid)
    moved = bias[:2 * groups * taps].view(groups, taps, 2, 1)  # (dy, dx) per group and tap
    torch.testing.assert_close(sampling.locations - grid, moved.expand_as(sampling.locations))
    if m.modulated:
        mask = bias[2 * groups * taps:].sigmoid().view(groups, taps, 1)
        torch.testing.assert_close(sampling.modulation, mask.expand_as(sampling.modulation))


@pytest.mark.parametrize("cls", DEFORMABLE)
@pytest.mark.parametrize("case", CASES_DEFORM)
def test_deformable_sampling_fed_to_torchvision_is_forward(cls, case):
    """The locations minus the regular grid, in torchvision's layout, and the modulation give forward's output."""
    m = make_deform(cls, *case)
    with torch.no_grad():
        m.conv_offset.weight.normal_(std=0.2)
        m.conv_offset.bias.uniform_(-1.5, 1.5)
    x = torch.randn(case[0], dtype=torch.float64)
    sampling = m.sampling_locations(x)
    h_out, w_out = sampling.output_grid
    n = x.shape[0]
    offset = (sampling.locations - regular_grid(m, h_out, w_out)).reshape(n, -1, h_out, w_out)
    mask = sampling.modulation.reshape(n, -1, h_out, w_out) if m.modulated else None
    expected = deform_conv2d(x, offset, m.weight, m.bias, m.stride, m.padding, m.dilation, mask)
    torch.testing.assert_close(m(x), expected, rtol=1e-10, atol=1e-10)
    positions = torch.tensor([h_out * w_out - 1, 1, 0])
    chosen = m.sampling_locations(x, positions)
    assert torch.equal(chosen.locations, sampling.locations[..., positions])
    assert torch.equal(chosen.modulation, sampling.modulation[..., positions])


# --- dynamic convolution ------------------------------------------------------------------------

@pytest.mark.parametrize("kernel_size,dilation", [(3, 1), (3, 2), (2, 1)])
def test_dynamic_conv2d_kernels_reproduce_forward(kernel_size, dilation):
    m = randomize(DynamicConv2d(8, kernel_size, num_heads=2, dilation=dilation)).double()
    x = torch.randn(2, 8, 5, 6, dtype=torch.float64)
    n, c, h, w = x.shape
    kernels = m.kernel_weights(x)  # (N, heads, k*k, HW)
    assert kernels.shape == (n, 2, kernel_size ** 2, h * w)
    torch.testing.assert_close(kernels.sum(2), torch.ones(n, 2, h * w, dtype=torch.float64))
    p = params64(m)
    value = torch.einsum("oc,nchw->nohw", p["value_conv.weight"][:, :, 0, 0], x)
    reach = dilation * (kernel_size - 1)
    padded = F.pad(value, (reach, reach, reach, reach))
    out = torch.zeros_like(value)
    for a in range(kernel_size):
        for b in range(kernel_size):  # tap a k + b reads (W_V x) at p + dilation (a - k // 2, b - k // 2)
            dy, dx = dilation * (a - kernel_size // 2), dilation * (b - kernel_size // 2)
            shifted = padded[:, :, reach + dy:reach + dy + h, reach + dx:reach + dx + w]
            tap = kernels[:, :, a * kernel_size + b].view(n, 2, 1, h, w)
            out += (tap * shifted.view(n, 2, c // 2, h, w)).view(n, c, h, w)
    out = torch.einsum("oc,nchw->nohw", p["proj_conv.weight"][:, :, 0, 0], out) + p["proj_conv.bias"][:, None, None]
    torch.testing.assert_close(x + p["gamma"] * out, m(x), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("cls", [LightweightConv1d, DynamicConv1d])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("kernel_size", [3, 4])
def test_dynamic_conv1d_kernels_reproduce_forward(cls, causal, kernel_size):
    m = randomize(cls(8, kernel_size, 2, causal=causal)).double().eval()
    x = torch.randn(2, 7, 8, dtype=torch.float64)
    mask = padding([7, 5], 7)
    kernels = m.kernel_weights(x, mask)  # (B, T, H, k)
    assert kernels.shape == (2, 7, 2, kernel_size)
    torch.testing.assert_close(kernels.sum(-1), torch.ones(2, 7, 2, dtype=torch.float64))
    inputs = x.masked_fill(mask[..., None], 0.0).view(2, 7, 2, 4)
    out = torch.zeros_like(inputs)
    for t in range(7):
        for j in range(kernel_size):  # tap j of step t reads step t + j - P
            s = t + j - m.padding_l
            if 0 <= s < 7:
                out[:, t] += kernels[:, t, :, j, None] * inputs[:, s]
    torch.testing.assert_close(out.view(2, 7, 8), m(x, mask), rtol=1e-10, atol=1e-10)


# --- every method: no effect on forward, precise errors -----------------------------------------

CALLS = {  # module, its input, the inspection call
    "2d": (lambda: randomize(GeneralizedAttention(8, num_heads=2, kv_stride=2, spatial_range=3)),
           (1, 8, 5, 6), lambda m, x: m.attention_maps(x, torch.tensor([3]))),
    "2d-global": (lambda: randomize(GeneralizedAttention(8, num_heads=2, attention_type="0010")),
                  (1, 8, 5, 6), lambda m, x: m.attention_maps(x)),
    "1d": (lambda: randomize(GeneralizedAttention1d(8, 2, "1111")), (2, 6, 8),
           lambda m, x: m.attention_maps(x, causal=True)),
    "deform": (lambda: randomize(ModulatedDeformConv2d(8, 4, 3, padding=1)), (1, 8, 5, 6),
               lambda m, x: m.sampling_locations(x)),
    "dynamic2d": (lambda: randomize(DynamicConv2d(8, num_heads=2)), (1, 8, 5, 6), lambda m, x: m.kernel_weights(x)),
    "dynamic1d": (lambda: randomize(DynamicConv1d(8, 3, 2)), (2, 6, 8), lambda m, x: m.kernel_weights(x)),
}


@pytest.mark.parametrize("name", CALLS)
def test_inspecting_leaves_forward_bit_identical(name):
    build, shape, inspect = CALLS[name]
    m = build().eval()
    x = torch.randn(shape)
    before, state = m(x), {k: v.clone() for k, v in m.state_dict().items()}
    inspect(m, x)
    assert torch.equal(m(x), before)
    assert all(torch.equal(v, state[k]) for k, v in m.state_dict().items())


def test_enabled_terms():
    assert enabled_terms(AttentionFactors.parse("1010")) == ("E1", "E3")
    assert enabled_terms(AttentionFactors.parse("0001")) == ("E4",)


@pytest.mark.parametrize("indices,match", [
    (torch.tensor([0.0]),
     r"queries must be a 1-D int64 tensor of flat indices into the 5x6 grid, got torch.float32 \(1,\)"),
    (torch.tensor([[0]]), r"queries must be a 1-D int64 tensor .* got torch.int64 \(1, 1\)"),
    ([0, 1], r"queries must be a 1-D int64 tensor .* got list"),
    (torch.tensor([0, 30]), r"queries must lie in \[0, 29\] \(the 5x6 grid, row-major\), got values from 0 to 30"),
    (torch.tensor([-1]), r"queries must lie in \[0, 29\]"),
])
def test_bad_queries(indices, match):
    m = GeneralizedAttention(8, num_heads=2, kv_stride=1)
    with pytest.raises(ValueError, match=match):
        m.attention_maps(torch.randn(1, 8, 5, 6), indices)


def test_bad_queries_1d_and_positions():
    with pytest.raises(ValueError, match=r"queries must lie in \[0, 5\] \(the 6 grid"):
        GeneralizedAttention1d(8, 2).attention_maps(torch.randn(1, 6, 8), queries=torch.tensor([6]))
    with pytest.raises(ValueError, match=r"positions must lie in \[0, 11\] \(the 3x4 grid"):
        DeformConv2d(8, 4, 3).sampling_locations(torch.randn(1, 8, 5, 6), torch.tensor([12]))
    with pytest.raises(ValueError, match=r"expected input \(N, 8, H, W\), got \(1, 4, 5, 6\)"):
        GeneralizedAttention(8, num_heads=2).attention_maps(torch.randn(1, 4, 5, 6))
