"""Survey channel-attention family: gather-excite, selective kernel, spatial pyramid
attention and FcaNet, checked on values against float64 references written from the equations.

Neither mmcv nor mmseg ships these modules, so there is no OpenMMLab counterpart to compare with;
the selective-kernel conv is built through mmcv's ``build_conv_layer`` as mmdet's Bottleneck does.
"""
import math

import pytest
import torch
import torch.nn as nn
from mmcv.cnn import build_conv_layer

from attnbench.attention.frequency_channel_attention import (
    FrequencyChannelAttention, dct_filters, selected_frequencies)
from attnbench.attention.gather_excite import GatherExcite
from attnbench.attention.selective_kernel import SelectiveKernelConv2d
from attnbench.attention.spatial_pyramid_attention import SpatialPyramidAttention
from attnbench.flops import count_macs
from reference import params64, randomize


# ---------------------------------------------------------------------------------------------
# float64 building blocks, written out (no torch.nn.functional convs, pools or norms)


def prepare(m, training):
    """Random parameters and BatchNorm running statistics; train or eval mode."""
    randomize(m)
    with torch.no_grad():
        for bn in m.modules():
            if isinstance(bn, nn.BatchNorm2d):
                bn.running_mean.normal_()
                bn.running_var.uniform_(0.5, 2.0)
    return m.train(training)


def batch_norm(p, name, v, training, eps=1e-5):
    """BN over dim 1 of ``(N, C, ...)``: batch statistics (biased variance) when training, else running ones."""
    shape = (1, -1) + (1,) * (v.dim() - 2)
    if training:
        dims = [0, *range(2, v.dim())]
        mean, var = v.mean(dims, keepdim=True), v.var(dims, unbiased=False, keepdim=True)
    else:
        mean, var = p[name + ".running_mean"].view(shape), p[name + ".running_var"].view(shape)
    return (v - mean) / torch.sqrt(var + eps) * p[name + ".weight"].view(shape) + p[name + ".bias"].view(shape)


def adaptive_avg_pool(x, s):
    """Bin ``(a, b)`` of an ``s x s`` grid averages rows ``floor(aH/s) .. ceil((a+1)H/s) - 1``, columns alike."""
    n, c, h, w = x.shape
    out = torch.empty(n, c, s, s, dtype=x.dtype)
    for a in range(s):
        for b in range(s):
            rows = slice(a * h // s, -(-(a + 1) * h // s))
            cols = slice(b * w // s, -(-(b + 1) * w // s))
            out[:, :, a, b] = x[:, :, rows, cols].mean((2, 3))
    return out


def conv2d(x, weight, stride=1, padding=0, dilation=1, groups=1):
    """Cross-correlation one kernel tap at a time over a zero-padded copy of ``x``."""
    n, cin, h, w = x.shape
    cout, cin_g, kh, kw = weight.shape
    padded = torch.zeros(n, cin, h + 2 * padding, w + 2 * padding, dtype=x.dtype)
    padded[:, :, padding:padding + h, padding:padding + w] = x
    ho = (h + 2 * padding - dilation * (kh - 1) - 1) // stride + 1
    wo = (w + 2 * padding - dilation * (kw - 1) - 1) // stride + 1
    out = torch.zeros(n, cout, ho, wo, dtype=x.dtype)
    cout_g = cout // groups
    for g in range(groups):
        for i in range(kh):
            for j in range(kw):
                patch = padded[:, g * cin_g:(g + 1) * cin_g,
                               i * dilation:i * dilation + stride * (ho - 1) + 1:stride,
                               j * dilation:j * dilation + stride * (wo - 1) + 1:stride]
                out[:, g * cout_g:(g + 1) * cout_g] += torch.einsum(
                    "oc,nchw->nohw", weight[g * cout_g:(g + 1) * cout_g, :, i, j], patch)
    return out


def mlp_gate(p, v):
    """sigmoid(W2 relu(W1 v)) on ``(N, F)``, bias-free fcs ``fc1``, ``fc2``."""
    return torch.sigmoid(torch.relu(v @ p["fc1.weight"].T) @ p["fc2.weight"].T)


# ---------------------------------------------------------------------------------------------
# references


def ge_reference(m, x):
    """x * sigmoid(nearest-upsampled gather(x)); the gather as in the paper's GE-theta^- / GE-theta."""
    p, x = params64(m), x.to(torch.float64)
    n, c, h, w = x.shape
    e = m.extent
    if not m.parametric and e == 0:
        context = x.mean((2, 3), keepdim=True)
    elif not m.parametric:  # mean over the (2e-1)-window centred on pixel (a e, b e), clipped to the map
        context = torch.empty(n, c, -(-h // e), -(-w // e), dtype=torch.float64)
        for a in range(context.shape[2]):
            for b in range(context.shape[3]):
                rows = slice(max(a * e - (e - 1), 0), min(a * e + e, h))
                cols = slice(max(b * e - (e - 1), 0), min(b * e + e, w))
                context[:, :, a, b] = x[:, :, rows, cols].mean((2, 3))
    elif e == 0:  # depthwise weighted sum over the adaptively pooled grid, then BN
        pooled = adaptive_avg_pool(x, m.global_grid)
        context = (pooled * p["gather.0.weight"][:, 0]).sum((2, 3))[:, :, None, None]
        context = batch_norm(p, "gather.1", context, m.training)
    else:  # log2(e) x [3x3 stride-2 depthwise conv, BN], ReLU between
        steps = int(math.log2(e))
        context = x
        for k in range(steps):
            context = conv2d(context, p[f"gather.{3 * k}.weight"], stride=2, padding=1, groups=c)
            context = batch_norm(p, f"gather.{3 * k + 1}", context, m.training)
            if k < steps - 1:
                context = torch.relu(context)
    hg, wg = context.shape[2:]
    rows, cols = [i * hg // h for i in range(h)], [j * wg // w for j in range(w)]  # nearest neighbour
    return x * torch.sigmoid(context[:, :, rows][:, :, :, cols])


def sk_reference(m, x):
    """Split (dilated 3x3 paths, BN, ReLU), fuse (sum, mean, fc, BN, ReLU), select (softmax over paths)."""
    p, x = params64(m), x.to(torch.float64)
    paths = []
    for i in range(m.num_paths):
        d = (i + 1) * m.dilation
        u = conv2d(x, p[f"paths.{i}.0.weight"], stride=m.stride, padding=d, dilation=d, groups=m.groups)
        paths.append(torch.relu(batch_norm(p, f"paths.{i}.1", u, m.training)))
    s = sum(paths).mean((2, 3))  # (N, C)
    z = torch.relu(batch_norm(p, "bn", s @ p["fc_reduce.weight"][:, :, 0, 0].T, m.training))
    logits = (z @ p["fc_select.weight"][:, :, 0, 0].T).view(x.shape[0], m.num_paths, m.out_channels)
    a = logits.exp() / logits.exp().sum(1, keepdim=True)
    return sum(a[:, i, :, None, None] * paths[i] for i in range(m.num_paths))


def spa_reference(m, x):
    """Pooled grids concatenated size by size, each channel-major; bias-free MLP; sigmoid gate."""
    p, x = params64(m), x.to(torch.float64)
    features = []
    for s in m.pool_sizes:
        pooled = adaptive_avg_pool(x, s)
        features += [pooled[:, c, a, b] for c in range(x.shape[1]) for a in range(s) for b in range(s)]
    return x * mlp_gate(p, torch.stack(features, 1))[:, :, None, None]


def dct(u, t, size):
    """Orthonormal DCT-II basis value b_u(t) on ``size`` points."""
    return math.cos(math.pi * u * (t + 0.5) / size) / math.sqrt(size) * (math.sqrt(2) if u else 1.0)


def frequency_of_channel(c, channels, count):
    """Index of channel c's frequency: the first ``channels % count`` frequencies take one channel more."""
    base, extra = divmod(channels, count)
    big = extra * (base + 1)
    return c // (base + 1) if c < big else extra + (c - big) // base


def fca_reference(m, x, frequencies):
    """Pool to D x D if needed, project each channel on its DCT basis, bias-free MLP, sigmoid gate."""
    p, x = params64(m), x.to(torch.float64)
    n, c, h, w = x.shape
    size = m.dct_size
    pooled = x if (h, w) == (size, size) else adaptive_avg_pool(x, size)
    spectrum = torch.zeros(n, c, dtype=torch.float64)
    for ch in range(c):
        u, v = frequencies[frequency_of_channel(ch, c, len(frequencies))]
        for i in range(size):
            for j in range(size):
                spectrum[:, ch] += pooled[:, ch, i, j] * dct(u, i, size) * dct(v, j, size)
    return x * mlp_gate(p, spectrum)[:, :, None, None]


# the official 'top16' table (ImageNet ranking of single frequencies, 7x7 grid), (u along H, v along W)
TOP16 = [(0, 0), (0, 1), (6, 0), (0, 5), (0, 2), (1, 0), (1, 2), (4, 0),
         (5, 0), (1, 6), (3, 0), (0, 4), (0, 6), (0, 3), (3, 5), (2, 2)]


# ---------------------------------------------------------------------------------------------
# values against the references

GE_CONFIGS = [dict(), dict(extent=2), dict(extent=3), dict(extent=4), dict(parametric=True),
              dict(parametric=True, global_grid=3), dict(extent=2, parametric=True),
              dict(extent=4, parametric=True)]
SHAPES = [(2, 8, 5, 7), (2, 8, 9, 4), (2, 8, 1, 1)]


@pytest.mark.parametrize("kwargs,training", [(kwargs, training) for kwargs in GE_CONFIGS
                                             for training in (True, False)[not kwargs.get("parametric"):]],
                         ids=str)  # GE-theta^- has no BatchNorm: its train and eval modes are the same
@pytest.mark.parametrize("shape", SHAPES)
def test_gather_excite_matches_the_equations(kwargs, training, shape):
    m = prepare(GatherExcite(8, **kwargs), training)
    x = torch.randn(shape)
    expected = ge_reference(m, x)
    torch.testing.assert_close(m.double()(x.double()), expected, rtol=1e-10, atol=1e-10)


def test_global_parametric_gather_is_a_full_size_depthwise_conv_on_a_map_of_that_size():
    """On a global_grid x global_grid map the gather is the paper's map-sized depthwise conv."""
    m = prepare(GatherExcite(8, parametric=True, global_grid=5), training=False)
    x = torch.randn(2, 8, 5, 5)
    p = params64(m)
    conv = (x.double() * p["gather.0.weight"][:, 0]).sum((2, 3), keepdim=True)
    expected = x.double() * torch.sigmoid(batch_norm(p, "gather.1", conv, training=False))
    torch.testing.assert_close(m.double()(x.double()), expected, rtol=1e-10, atol=1e-10)


SK_CONFIGS = [(16, 16, dict()), (16, 24, dict(stride=2, padding=2, dilation=2, groups=4, num_paths=3)),
              (8, 8, dict(stride=2, reduction=4, min_hidden=2))]


@pytest.mark.parametrize("cin,cout,kwargs", SK_CONFIGS)
@pytest.mark.parametrize("hw", [(5, 7), (8, 3)])
@pytest.mark.parametrize("training", [True, False])
def test_selective_kernel_matches_the_equations(cin, cout, kwargs, hw, training):
    m = prepare(SelectiveKernelConv2d(cin, cout, **kwargs), training)
    x = torch.randn(2, cin, *hw)
    expected = sk_reference(m, x)
    torch.testing.assert_close(m.double()(x.double()), expected, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("stride", [1, 2])
@pytest.mark.parametrize("dilation", [1, 2, 3])
@pytest.mark.parametrize("hw", [(1, 1), (5, 7), (8, 8), (9, 2)])
def test_selective_kernel_built_by_mmcv_has_the_plain_conv_output_size(stride, dilation, hw):
    """mmdet's Bottleneck builds conv2 as build_conv_layer(dcn, planes, planes, kernel_size=3,
    stride=, padding=dilation, dilation=dilation, bias=False)."""
    m = build_conv_layer(dict(type=SelectiveKernelConv2d, num_paths=2), 16, 16, kernel_size=3,
                         stride=stride, padding=dilation, dilation=dilation, bias=False).eval()
    plain = nn.Conv2d(16, 16, 3, stride=stride, padding=dilation, dilation=dilation, bias=False)
    x = torch.randn(1, 16, *hw)
    assert m(x).shape == plain(x).shape
    assert m.output_size(*hw) == tuple(plain(x).shape[2:])


@pytest.mark.parametrize("channels,hidden", [(8, 8), (16, 16), (64, 32), (512, 32), (1024, 64), (2048, 128)])
def test_selective_kernel_bottleneck_width(channels, hidden):
    """d = max(C / r, L) with L = 32, capped at C for narrow layers (groups only keep the test light)."""
    assert SelectiveKernelConv2d(channels, channels, groups=8).hidden_channels == hidden


def test_selective_kernel_weights_sum_to_one_over_paths():
    """With identical paths the selection is a convex combination: y equals each path's output."""
    m = prepare(SelectiveKernelConv2d(8, 8, num_paths=3), training=False)
    with torch.no_grad():
        for path in m.paths[1:]:
            path.load_state_dict(m.paths[0].state_dict())
            path[0].dilation = path[0].padding = (1, 1)
    x = torch.randn(2, 8, 6, 5)
    torch.testing.assert_close(m(x), m.paths[0](x), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kwargs", [dict(), dict(pool_sizes=(1, 3), reduction=4)], ids=str)
@pytest.mark.parametrize("shape", [(2, 16, 5, 7), (1, 16, 9, 4), (2, 16, 1, 1), (1, 16, 3, 2)])
def test_spatial_pyramid_attention_matches_the_equations(kwargs, shape):
    m = randomize(SpatialPyramidAttention(16, **kwargs))
    x = torch.randn(shape)
    torch.testing.assert_close(m.double()(x.double()), spa_reference(m, x), rtol=1e-10, atol=1e-10)


def test_spatial_pyramid_attention_has_21_c_pooled_features():
    m = SpatialPyramidAttention(32)
    assert (m.fc1.in_features, m.fc1.out_features, m.fc2.out_features) == (21 * 32, 2, 32)


@pytest.mark.parametrize("channels,selection,dct_size,frequencies", [
    (16, "top16", 7, TOP16),  # one channel per frequency
    (32, "top16", 7, TOP16),  # the official split: two channels each
    (24, "top16", 7, TOP16),  # uneven: the first 8 frequencies take 2 channels
    (8, "top16", 7, TOP16),  # fewer channels than frequencies: the first 8 are used
    (16, "low4", 14, [(0, 0), (0, 2), (2, 0), (2, 2)]),  # 7x7 frequencies scaled to 14x14
    (12, "bot2", 7, [(6, 6), (1, 4)]),
])
@pytest.mark.parametrize("hw", [(7, 7), (14, 14), (5, 9), (1, 1)])
def test_frequency_channel_attention_matches_the_equations(channels, selection, dct_size, frequencies, hw):
    m = randomize(FrequencyChannelAttention(channels, reduction=4, frequency_selection=selection,
                                            dct_size=dct_size))
    x = torch.randn(2, channels, *hw)
    # the module's DCT basis is a float32 buffer (rounded once at build), the reference's exact: 1e-6, not 1e-10
    torch.testing.assert_close(m.double()(x.double()), fca_reference(m, x, frequencies), rtol=1e-6, atol=1e-6)


def test_frequency_tables():
    assert selected_frequencies("top16") == TOP16
    assert selected_frequencies("top32", 21)[:3] == [(0, 0), (0, 3), (18, 0)]
    for table in ("top", "low", "bot"):
        pairs = selected_frequencies(f"{table}32")
        assert len(set(pairs)) == 32 and all(0 <= u < 7 and 0 <= v < 7 for u, v in pairs)


@pytest.mark.parametrize("size", [7, 14])
def test_dct_filters_are_orthonormal(size):
    every = [(u, v) for u in range(size) for v in range(size)]
    basis = dct_filters(size * size, every, size).double().flatten(1)  # one frequency per channel
    torch.testing.assert_close(basis @ basis.T, torch.eye(size * size, dtype=torch.float64), rtol=0, atol=1e-6)


def test_dct_filter_is_a_fixed_non_persistent_buffer():
    m = FrequencyChannelAttention(16)
    assert "dct_filter" not in m.state_dict() and "dct_filter" in dict(m.named_buffers())
    assert all(p.shape != m.dct_filter.shape for p in m.parameters())
    assert m.double().dct_filter.dtype == torch.float64


# ---------------------------------------------------------------------------------------------
# gradients, counts, argument and input checks

BUILDERS = {
    "ge": lambda c: GatherExcite(c),
    "ge_extent4": lambda c: GatherExcite(c, extent=4),
    "ge_theta_global": lambda c: GatherExcite(c, parametric=True),
    "ge_theta_extent4": lambda c: GatherExcite(c, extent=4, parametric=True),
    "sk": lambda c: SelectiveKernelConv2d(c, c),
    "sk_strided": lambda c: SelectiveKernelConv2d(c, 2 * c, stride=2, padding=2, dilation=2, groups=2, num_paths=3),
    "spa": lambda c: SpatialPyramidAttention(c),
    "fca": lambda c: FrequencyChannelAttention(c),
    "fca_uneven": lambda c: FrequencyChannelAttention(c + 4, frequency_selection="low8", dct_size=14),
}


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_gradcheck(name):
    m = randomize(BUILDERS[name](4)).double()
    x = torch.randn(2, m.in_channels, 5, 6, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(m, (x,), fast_mode=True)  # random projections: the full Jacobian takes ~15 s


@pytest.mark.parametrize("name", sorted(BUILDERS))
@pytest.mark.parametrize("shape", [(2, 32, 12, 10), (1, 16, 7, 9)])
def test_macs_match_the_counter(name, shape):
    m = BUILDERS[name](shape[1]).eval()
    shape = (shape[0], m.in_channels, *shape[2:])
    x = torch.randn(shape)
    measured = count_macs(m, x)
    if name in ("ge", "ge_extent4"):
        assert measured == m.macs(x) == 0  # parameter-free: pooling and gating only
    else:
        assert measured > 0
        assert abs(m.macs(x) - measured) <= 0.02 * measured, (m.macs(x), measured)


@pytest.mark.parametrize("name", sorted(BUILDERS))
@pytest.mark.parametrize("shape", [(2, 8, 4), (2, 15, 4, 4), (16,)])
def test_bad_input_shapes_are_rejected(name, shape):
    m = BUILDERS[name](16)
    with pytest.raises(ValueError, match=rf"expected input \(N, {m.in_channels}, H, W\), got"):
        m(torch.randn(shape))


@pytest.mark.parametrize("build,message", [
    (lambda: GatherExcite(0), "in_channels must be >= 1, got 0"),
    (lambda: GatherExcite(16, extent=1), r"extent must be None or 0 \(global\) or an int >= 2, got 1"),
    (lambda: GatherExcite(16, extent=-2), "extent must be None or 0 .* got -2"),
    (lambda: GatherExcite(16, extent=6, parametric=True), "extent must be a power of two, got 6"),
    (lambda: GatherExcite(16, parametric=True, global_grid=0), "global_grid must be >= 1, got 0"),
    (lambda: SelectiveKernelConv2d(16, 16, kernel_size=5, padding=2), "kernel_size must be 3 .* got 5"),
    (lambda: SelectiveKernelConv2d(16, 16, padding=0), r"padding must equal dilation .* padding=0, dilation=1"),
    (lambda: SelectiveKernelConv2d(16, 16, groups=3), r"in_channels \(16\) and out_channels \(16\) must be "
                                                      r"multiples of groups \(3\)"),
    (lambda: SelectiveKernelConv2d(16, 16, bias=True), "bias=True is not supported"),
    (lambda: SelectiveKernelConv2d(16, 16, num_paths=1), "num_paths must be an int >= 2, got 1"),
    (lambda: SelectiveKernelConv2d(16, 16, reduction=0), "reduction must be a positive integer, got 0"),
    (lambda: SelectiveKernelConv2d(0, 16), "in_channels must be a positive integer, got 0"),
    (lambda: SpatialPyramidAttention(16, reduction=0), "reduction must be >= 1, got 0"),
    (lambda: SpatialPyramidAttention(16, pool_sizes=()), r"pool_sizes must be a non-empty sequence of ints "
                                                         r">= 1, got \(\)"),
    (lambda: SpatialPyramidAttention(16, pool_sizes=(1, 0)), r"pool_sizes .* got \(1, 0\)"),
    (lambda: FrequencyChannelAttention(16, reduction=0), "reduction must be >= 1, got 0"),
    (lambda: FrequencyChannelAttention(16, frequency_selection="top3"), r"frequency_selection must be one of "
                                                                        r"\['bot', 'low', 'top'\] .* got 'top3'"),
    (lambda: FrequencyChannelAttention(16, frequency_selection="mid16"), "got 'mid16'"),
    (lambda: FrequencyChannelAttention(16, dct_size=8), "dct_size must be a positive multiple of 7 .* got 8"),
])
def test_bad_arguments_are_rejected(build, message):
    with pytest.raises(ValueError, match=message):
        build()


@pytest.mark.parametrize("name,channels", [(name, c) for name in sorted(BUILDERS) for c in (16, 512, 2048)
                                           if not (name.startswith("sk") and c == 2048)])  # SK: 75M weights
def test_defaults_build_for_the_benchmark_widths(name, channels):
    """The benchmark plugs these in at bottleneck widths 16 (mini configs) to 2048."""
    m = BUILDERS[name](channels).eval()
    x = torch.randn(1, m.in_channels, 3, 2)
    expected = (1, m.out_channels, *m.output_size(3, 2)) if name.startswith("sk") else x.shape
    assert m(x).shape == expected
