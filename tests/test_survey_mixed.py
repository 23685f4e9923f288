"""Survey mixed attention: BAM, scSE, A^2 double attention, residual attention, checked on values.

None of the four ships in mmcv or mmseg, so each is checked against a float64 reference written from
the paper's equations: convolutions one tap at a time, max pools one window offset at a time,
bilinear resizing from its interpolation weights and softmaxes as ``exp / sum``. Modules with
BatchNorm are compared in eval mode with random running statistics.
"""
import math

import pytest
import torch

from attnbench.attention.bam import BAM
from attnbench.attention.double_attention import DoubleAttention
from attnbench.attention.residual_attention import ResidualAttention
from attnbench.attention.scse import SpatialChannelSqueezeExcite
from reference import fc, params64, randomize

CLASSES = [BAM, SpatialChannelSqueezeExcite, DoubleAttention, ResidualAttention]
SHAPES = [(2, 16, 5, 7), (1, 16, 1, 1), (1, 16, 9, 4)]


def make(cls, channels=16, **kwargs):
    """The module with every parameter and BatchNorm statistic random, in eval mode."""
    defaults = {BAM: dict(reduction=4), ResidualAttention: dict(reduction=2)}
    m = randomize(cls(channels, **(defaults.get(cls, {}) | kwargs)))
    with torch.no_grad():
        for bn in m.modules():
            if isinstance(bn, torch.nn.BatchNorm2d):
                bn.running_mean.normal_()
                bn.running_var.uniform_(0.5, 2.0)
    return m.eval()


# ---- plain float64 building blocks ----

def batch_norm(p, name, z):
    """Eval-mode BatchNorm over dim 1 of a (N, C, ...) tensor."""
    shape = (1, -1) + (1,) * (z.dim() - 2)
    scale = p[name + ".weight"] / torch.sqrt(p[name + ".running_var"] + 1e-5)
    return (z - p[name + ".running_mean"].view(shape)) * scale.view(shape) + p[name + ".bias"].view(shape)


def conv(p, name, z, dilation=1):
    """Zero-padded 'same' convolution, summed one kernel tap at a time (bias if the module has one)."""
    weight = p[name + ".weight"]
    k = weight.shape[-1]
    pad = dilation * (k // 2)
    n, _, h, w = z.shape
    padded = torch.zeros(n, z.shape[1], h + 2 * pad, w + 2 * pad, dtype=z.dtype)
    padded[:, :, pad:pad + h, pad:pad + w] = z
    out = torch.zeros(n, weight.shape[0], h, w, dtype=z.dtype)
    for a in range(k):
        for b in range(k):
            window = padded[:, :, a * dilation:a * dilation + h, b * dilation:b * dilation + w]
            out += torch.einsum("oc,nchw->nohw", weight[:, :, a, b], window)
    if name + ".bias" in p:
        out += p[name + ".bias"].view(1, -1, 1, 1)
    return out


def max_pool(z):
    """3x3 stride-2 max pool with padding 1 (padding never wins): output side ceil(s / 2)."""
    n, c, h, w = z.shape
    oh, ow = math.ceil(h / 2), math.ceil(w / 2)
    padded = torch.full((n, c, h + 2, w + 2), float("-inf"), dtype=z.dtype)
    padded[:, :, 1:h + 1, 1:w + 1] = z
    out = torch.full((n, c, oh, ow), float("-inf"), dtype=z.dtype)
    for a in range(3):
        for b in range(3):
            out = torch.maximum(out, padded[:, :, a:a + 2 * oh - 1:2, b:b + 2 * ow - 1:2])
    return out


def interpolation_weights(size_in, size_out):
    """(size_out, size_in) linear interpolation matrix, half-pixel centres (align_corners=False)."""
    weights = torch.zeros(size_out, size_in, dtype=torch.float64)
    for i in range(size_out):
        src = max((i + 0.5) * size_in / size_out - 0.5, 0.0)
        i0 = min(int(math.floor(src)), size_in - 1)
        i1 = min(i0 + 1, size_in - 1)
        frac = src - i0
        weights[i, i0] += 1 - frac
        weights[i, i1] += frac
    return weights


def bilinear(z, size):
    rows, cols = interpolation_weights(z.shape[2], size[0]), interpolation_weights(z.shape[3], size[1])
    return torch.einsum("yh,nchw,xw->ncyx", rows, z, cols)


def softmax(z, dim):
    e = torch.exp(z - z.amax(dim, keepdim=True))
    return e / e.sum(dim, keepdim=True)


# ---- references ----

def bam_reference(m, x):
    """y = x + x * sigmoid(BN(W1 relu(W0 avg(x))) + BN(f3 f2 f1 f0 x)), Eq. 1-4."""
    p, x = params64(m), x.to(torch.float64)
    z = x.mean((2, 3))
    hidden = torch.relu(fc(p, "channel_gate.0", z))
    channel = batch_norm(p, "channel_gate.3", hidden @ p["channel_gate.2.weight"][:, :, 0, 0].T)  # (N, C)
    s = torch.relu(batch_norm(p, "spatial_gate.1", conv(p, "spatial_gate.0", x)))
    for i in (3, 6):
        s = torch.relu(batch_norm(p, f"spatial_gate.{i + 1}", conv(p, f"spatial_gate.{i}", s, m.dilation)))
    spatial = batch_norm(p, "spatial_gate.10", conv(p, "spatial_gate.9", s))  # (N, 1, H, W)
    return x + x * torch.sigmoid(channel[:, :, None, None] + spatial)


def scse_reference(m, x):
    p, x = params64(m), x.to(torch.float64)
    s = torch.sigmoid(fc(p, "channel_gate.fc2", torch.relu(fc(p, "channel_gate.fc1", x.mean((2, 3))))))
    x_cse = x * s[:, :, None, None]
    x_sse = x * torch.sigmoid(conv(p, "spatial_conv", x))
    return {"max": torch.where(x_cse > x_sse, x_cse, x_sse), "add": x_cse + x_sse, "mul": x_cse * x_sse}[m.aggregation]


def double_attention_reference(m, x):
    """G = A softmax_L(B)^T, Z = G softmax_cn(V), y = x + W_out Z + b_out, one position at a time."""
    p, x = params64(m), x.to(torch.float64)
    n, c, h, w = x.shape
    k = m.attention_channels
    embedded = conv(p, "embed", x).reshape(n, 3 * k, h * w)
    a, b, v = embedded[:, :k], embedded[:, k:2 * k], embedded[:, 2 * k:]
    maps = softmax(b, 2)  # each of the c_n maps sums to 1 over positions
    vectors = softmax(v, 1)  # each position's vector sums to 1 over the c_n descriptors
    gathered = torch.einsum("nml,njl->nmj", a, maps)  # (N, c_m, c_n), g_j = sum_l a_l b_jl
    z = torch.zeros(n, k, h * w, dtype=torch.float64)
    for i in range(h * w):
        z[:, :, i] = (gathered * vectors[:, None, :, i]).sum(2)  # z_i = sum_j v_ij g_j
    return x + conv(p, "out_conv", z.reshape(n, k, h, w))


def residual_attention_reference(m, x):
    """y = (1 + M(x)) x with the bottom-up top-down mask M written level by level."""
    p, x = params64(m), x.to(torch.float64)

    def unit(name, z):
        return z + conv(p, name + ".conv", torch.relu(batch_norm(p, name + ".norm", z)))

    down = [unit("down_units.0", conv(p, "reduce", max_pool(x)))]
    for level in range(1, m.depth):
        down.append(unit(f"down_units.{level}", max_pool(down[-1])))
    z = down[-1]
    for level in reversed(range(m.depth - 1)):  # skip from d_{level+1}, unit up_units.{level}
        skip = down[level]
        z = unit(f"up_units.{level}", bilinear(z, skip.shape[2:]) + skip)
    z = bilinear(z, x.shape[2:])
    z = conv(p, "head.2", torch.relu(batch_norm(p, "head.0", z)))
    mask = torch.sigmoid(conv(p, "head.5", torch.relu(batch_norm(p, "head.3", z))))
    return (1 + mask) * x


# ---- tests ----

@pytest.mark.parametrize("shape", SHAPES)
def test_bam_matches_the_equations(shape):
    torch.manual_seed(0)
    m = make(BAM, dilation=2 if shape[2] == 9 else 4)
    x = torch.randn(shape)
    torch.testing.assert_close(m.double()(x.double()), bam_reference(m, x), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("aggregation", ["max", "add", "mul"])
@pytest.mark.parametrize("shape", SHAPES)
def test_scse_matches_the_equations(aggregation, shape):
    torch.manual_seed(0)
    m = make(SpatialChannelSqueezeExcite, aggregation=aggregation)
    x = torch.randn(shape)
    torch.testing.assert_close(m.double()(x.double()), scse_reference(m, x), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("reduction", [4, 1])
@pytest.mark.parametrize("shape", SHAPES)
def test_double_attention_matches_the_equations(reduction, shape):
    torch.manual_seed(0)
    m = make(DoubleAttention, reduction=reduction)
    x = torch.randn(shape)
    torch.testing.assert_close(m.double()(x.double()), double_attention_reference(m, x), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("depth", [1, 2, 3])
@pytest.mark.parametrize("shape", SHAPES + [(1, 16, 17, 10)])
def test_residual_attention_matches_the_equations(depth, shape):
    torch.manual_seed(0)
    m = make(ResidualAttention, depth=depth)
    x = torch.randn(shape)
    torch.testing.assert_close(m.double()(x.double()), residual_attention_reference(m, x), rtol=1e-10, atol=1e-10)


def test_residual_attention_mask_is_mixed_and_bounded():
    torch.manual_seed(0)
    m = make(ResidualAttention)
    mask = m.mask(torch.randn(2, 16, 6, 5))
    assert mask.shape == (2, 16, 6, 5) and 0 < mask.min() and mask.max() < 1
    assert mask.std((1,)).min() > 0 and mask.std((2, 3)).min() > 0  # varies over channels and pixels


@pytest.mark.parametrize("cls", [BAM, ResidualAttention])
@pytest.mark.parametrize("shape", [(2, 16, 5, 7), (2, 16, 1, 1)])
def test_batch_norm_modules_train(cls, shape):
    torch.manual_seed(0)
    m = make(cls).train()
    x = torch.randn(shape, requires_grad=True)
    y = m(x)
    y.square().sum().backward()
    assert y.shape == shape and torch.isfinite(y).all() and torch.isfinite(x.grad).all()
    assert not torch.allclose(y, m.eval()(x))  # batch statistics, not the running ones, were used


@pytest.mark.parametrize("cls,kwargs", [(BAM, dict(dilation=1)), (SpatialChannelSqueezeExcite, {}),
                                        (SpatialChannelSqueezeExcite, dict(aggregation="mul")),
                                        (DoubleAttention, {}), (ResidualAttention, {})])
def test_gradcheck(cls, kwargs):
    torch.manual_seed(0)
    m = make(cls, channels=8, **kwargs).double()
    x = torch.randn(2, 8, 3, 4, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(m, (x,), fast_mode=True)


@pytest.mark.parametrize("cls", CLASSES)
@pytest.mark.parametrize("channels", [16, 2048])
def test_defaults_cover_the_benchmark_widths(cls, channels):
    m = cls(channels).eval()
    for shape in [(1, channels, 1, 1), (2, channels, 3, 5)]:
        y = m(torch.randn(shape))
        assert y.shape == shape and torch.isfinite(y).all()


@pytest.mark.parametrize("build,message", [
    (lambda: BAM(0), "in_channels must be >= 1, got 0"),
    (lambda: BAM(16, reduction=0), "reduction must be >= 1, got 0"),
    (lambda: BAM(16, dilation=0), "dilation must be >= 1, got 0"),
    (lambda: SpatialChannelSqueezeExcite(0), "in_channels must be >= 1, got 0"),
    (lambda: SpatialChannelSqueezeExcite(16, reduction=-2), "reduction must be >= 1, got -2"),
    (lambda: SpatialChannelSqueezeExcite(16, aggregation="concat"),
     r"aggregation must be one of \('max', 'add', 'mul'\), got 'concat'"),
    (lambda: DoubleAttention(0), "in_channels must be >= 1, got 0"),
    (lambda: DoubleAttention(16, reduction=0), "reduction must be >= 1, got 0"),
    (lambda: ResidualAttention(0), "in_channels must be >= 1, got 0"),
    (lambda: ResidualAttention(16, reduction=0), "reduction must be >= 1, got 0"),
    (lambda: ResidualAttention(16, depth=0), "depth must be >= 1, got 0"),
])
def test_bad_arguments_are_rejected(build, message):
    with pytest.raises(ValueError, match=message):
        build()
