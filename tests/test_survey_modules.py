"""Survey add-ons: squeeze-excite, CBAM, global context, non-local, checked on values."""
import pytest
import torch
from mmcv.cnn import ContextBlock
from mmcv.cnn import NonLocal2d as MMCVNonLocal2d

from attnbench.attention import (
    CBAM, AsymmetricNonLocal2d, DoubleAttention, DualAttention, GlobalContext, InteractionAggregation2d, NonLocal2d,
    SqueezeExcite)
from attnbench.flops import count_macs
from attnbench.sweep.catalog import build_mechanism
from attnbench.variants import MECHANISMS, SURVEY_VARIANTS
from reference import fc, params64, randomize

CLASSES = [SqueezeExcite, CBAM, GlobalContext, NonLocal2d]


def make(cls, channels=16, **kwargs):
    defaults = {SqueezeExcite: dict(reduction=4), CBAM: dict(reduction=4, spatial_kernel=3)}
    return randomize(cls(channels, **(defaults.get(cls, {}) | kwargs)))


def se_reference(m, x):
    """x * sigmoid(W2 relu(W1 avgpool(x))), one sample at a time in float64."""
    p, x = params64(m), x.to(torch.float64)
    z = x.mean((2, 3))
    s = torch.sigmoid(fc(p, "fc2", torch.relu(fc(p, "fc1", z))))
    return x * s[:, :, None, None]


def cbam_reference(m, x):
    """M_c = sigmoid(MLP(avg) + MLP(max)); x' = M_c x; M_s = sigmoid(conv([mean_c x', max_c x'])),
    the conv one pixel and one tap at a time."""
    p, x = params64(m), x.to(torch.float64)
    n, c, h, w = x.shape

    def mlp(v):
        return fc(p, "fc2", torch.relu(fc(p, "fc1", v)))

    gate = torch.sigmoid(mlp(x.mean((2, 3))) + mlp(x.flatten(2).max(2).values))
    x = x * gate[:, :, None, None]
    maps = torch.stack([x.mean(1), x.max(1).values], 1)  # (N, 2, H, W)
    k = m.spatial_kernel
    weight, bias = p["spatial_conv.weight"][0], p["spatial_conv.bias"][0]  # (2, k, k)
    logits = torch.full((n, h, w), float(bias), dtype=torch.float64)
    for py in range(h):
        for px in range(w):
            for a in range(k):
                for b in range(k):
                    sy, sx = py + a - k // 2, px + b - k // 2
                    if 0 <= sy < h and 0 <= sx < w:
                        logits[:, py, px] += (weight[:, a, b] * maps[:, :, sy, sx]).sum(1)
    return x * torch.sigmoid(logits)[:, None]


def gc_reference(m, x):
    """a = softmax_HW(W_k x + b_k), c = sum_j a_j x_j, y = x + W_2 relu(LN(W_1 c + b_1)) + b_2 (LayerNorm over the
    C' values, eps 1e-5, with its affine), one sample at a time in float64."""
    p, x = params64(m), x.to(torch.float64)
    out = []
    for sample in x:
        pixels = sample.flatten(1)  # (C, HW)
        logits = fc(p, "context_conv", pixels.T)[:, 0]  # (HW,)
        weights = torch.exp(logits - logits.max())
        weights = weights / weights.sum()
        hidden = fc(p, "transform.0", pixels @ weights)
        normed = (hidden - hidden.mean()) / torch.sqrt(((hidden - hidden.mean()) ** 2).mean() + 1e-5)
        normed = normed * p["transform.1.weight"].flatten() + p["transform.1.bias"].flatten()
        out.append(sample + fc(p, "transform.3", torch.relu(normed))[:, None, None])
    return torch.stack(out)


def non_local_reference(m, x):
    """y_i = x_i + W_z sum_j f_ij g(x_j) + b_z with f_ij = softmax_j(theta_i . phi_j / sqrt(C')) (embedded Gaussian,
    mmcv's scale) or theta_i . phi_j / HW (dot product); one query pixel and one key at a time, in float64."""
    p, x = params64(m), x.to(torch.float64)
    out = []
    for sample in x:
        c, h, w = sample.shape
        theta, phi, g = (fc(p, name, sample.flatten(1).T) for name in ("theta", "phi", "g"))  # (HW, C')
        context = torch.zeros_like(g)
        for i in range(h * w):
            scores = torch.stack([theta[i] @ phi[j] for j in range(h * w)])
            if m.mode == "embedded_gaussian":
                scores = torch.exp(scores / theta.shape[1] ** 0.5)
                f = scores / scores.sum()
            else:
                f = scores / (h * w)
            context[i] = sum(f[j] * g[j] for j in range(h * w))
        out.append(sample + fc(p, "out_conv", context).T.reshape(c, h, w))
    return torch.stack(out)


@pytest.mark.parametrize("cls,kwargs,reference", [
    (GlobalContext, dict(ratio=1 / 4), gc_reference),
    *[(NonLocal2d, dict(mode=mode), non_local_reference) for mode in ("embedded_gaussian", "dot_product")]])
@pytest.mark.parametrize("shape", [(2, 16, 5, 7), (1, 16, 3, 1)])
def test_context_blocks_match_the_equations(cls, kwargs, reference, shape):
    torch.manual_seed(0)
    m = make(cls, **kwargs)
    x = torch.randn(shape)
    torch.testing.assert_close(m.double()(x.double()), reference(m, x), rtol=1e-10, atol=1e-10)


def copy_gc_to_mmcv(m):
    ref = ContextBlock(m.in_channels, m.ratio, pooling_type="att", fusion_types=("channel_add",))
    names = {"context_conv": "conv_mask", "transform": "channel_add_conv"}
    ref.load_state_dict({names[k.split(".", 1)[0]] + "." + k.split(".", 1)[1]: v
                         for k, v in m.state_dict().items()})
    return ref


def copy_nonlocal_to_mmcv(m):
    ref = MMCVNonLocal2d(m.in_channels, reduction=m.reduction, mode=m.mode)  # use_scale=True, no norm
    names = {"theta": "theta.conv", "phi": "phi.conv", "g": "g.conv", "out_conv": "conv_out.conv"}
    ref.load_state_dict({names[k.rsplit(".", 1)[0]] + "." + k.rsplit(".", 1)[1]: v
                         for k, v in m.state_dict().items()})
    return ref


@pytest.mark.parametrize("cls,reference", [(SqueezeExcite, se_reference), (CBAM, cbam_reference)])
@pytest.mark.parametrize("shape", [(2, 16, 5, 7), (1, 16, 1, 1)])
def test_gate_modules_match_the_equations(cls, reference, shape):
    torch.manual_seed(0)
    m = make(cls)
    x = torch.randn(shape)
    torch.testing.assert_close(m.double()(x.double()), reference(m, x), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("shape", [(2, 16, 5, 7), (1, 16, 1, 3)])
def test_global_context_matches_mmcv_context_block(shape):
    torch.manual_seed(0)
    m = make(GlobalContext, ratio=1 / 4)
    ref = copy_gc_to_mmcv(m)
    x = torch.randn(shape)
    torch.testing.assert_close(m(x), ref(x), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mode", ["embedded_gaussian", "dot_product"])
@pytest.mark.parametrize("shape", [(2, 16, 5, 7), (1, 16, 3, 1)])
def test_non_local_matches_mmcv(mode, shape):
    torch.manual_seed(0)
    m = make(NonLocal2d, mode=mode)
    ref = copy_nonlocal_to_mmcv(m)
    x = torch.randn(shape)
    torch.testing.assert_close(m(x), ref(x), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("cls,kwargs", [(SqueezeExcite, {}), (CBAM, {}), (GlobalContext, {}),
                                        (NonLocal2d, dict(mode="embedded_gaussian")),
                                        (NonLocal2d, dict(mode="dot_product"))])
def test_gradcheck(cls, kwargs):
    torch.manual_seed(0)
    m = make(cls, channels=8, **kwargs).double()
    x = torch.randn(2, 8, 3, 4, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(m, (x,))


#: Residual survey blocks (y = x + f(x)) whose last layer or gamma starts at zero, with their modes.
RESIDUAL_BLOCKS = [(GlobalContext, {}), (NonLocal2d, {}), (DoubleAttention, {}), (DualAttention, {}),
                   (AsymmetricNonLocal2d, {}),
                   *[(InteractionAggregation2d, dict(mode=mode)) for mode in ("channel", "spatial", "both")]]


@pytest.mark.parametrize("cls,kwargs", RESIDUAL_BLOCKS)
def test_residual_blocks_start_as_identity(cls, kwargs):
    torch.manual_seed(0)
    m = cls(16, **kwargs)
    x = torch.randn(2, 16, 5, 6)
    torch.testing.assert_close(m(x), x, rtol=0, atol=0)
    randomize(m).reset_parameters()
    torch.testing.assert_close(m(x), x, rtol=0, atol=0)


#: Every survey module placed after conv2, as the benchmark builds it (registry type and kwargs).
SURVEY_PLUGINS = [t for t in SURVEY_VARIANTS if MECHANISMS[t].placement == "plugin"]


@pytest.mark.parametrize("token", SURVEY_PLUGINS)
@pytest.mark.parametrize("shape", [(2, 64, 12, 10), (1, 32, 7, 9)])
def test_plugins_keep_the_shape_and_macs_match_the_counter(token, shape):
    m = build_mechanism(token, shape[1]).eval()
    x = torch.randn(shape)
    assert m(x).shape == x.shape
    measured = count_macs(m, x)
    assert abs(m.macs(x) - measured) <= 0.02 * max(measured, 1), (m.macs(x), measured)


@pytest.mark.parametrize("token", SURVEY_PLUGINS)
@pytest.mark.parametrize("shape", [(2, 8, 4), (2, 15, 4, 4), (16,)])
def test_bad_input_shapes_are_rejected(token, shape):
    with pytest.raises(ValueError, match=r"expected input \(N, 16, H, W\), got"):
        build_mechanism(token, 16)(torch.randn(shape))


@pytest.mark.parametrize("build,message", [
    (lambda: SqueezeExcite(0), "in_channels must be >= 1, got 0"),
    (lambda: SqueezeExcite(16, reduction=0), "reduction must be >= 1, got 0"),
    (lambda: CBAM(16, reduction=-1), "reduction must be >= 1, got -1"),
    (lambda: CBAM(16, spatial_kernel=4), "spatial_kernel must be a positive odd integer, got 4"),
    (lambda: GlobalContext(16, ratio=1 / 32),
     r"ratio must give a bottleneck of >= 1 channel .* ratio=0.03125"),
    (lambda: GlobalContext(16, ratio=-0.5), "ratio must give a bottleneck"),
    (lambda: NonLocal2d(16, mode="gaussian"), r"mode must be one of \('embedded_gaussian', 'dot_product'\), "
                                              r"got 'gaussian'"),
    (lambda: NonLocal2d(16, reduction=0), "reduction must be >= 1, got 0"),
])
def test_bad_arguments_are_rejected(build, message):
    with pytest.raises(ValueError, match=message):
        build()


def test_plugins_are_registered_and_variants_parse():
    import attnbench.mm  # noqa: F401
    from attnbench.mm.plugins import PLUGINS
    from attnbench.flops import ATTENTION_MODULES
    from attnbench.variants import SURVEY_VARIANTS, Variant

    for name, cls in zip(["SqueezeExcite", "CBAM", "GlobalContext", "NonLocal2d"], CLASSES):
        assert PLUGINS[name] is cls and cls in ATTENTION_MODULES
    for spec in SURVEY_VARIANTS:
        for plugin in Variant.parse(spec).backbone_overrides().get("plugins", []):
            assert "num_heads" not in plugin["cfg"]
    (plugin,) = Variant.parse("dynamic:heads=4").backbone_overrides()["plugins"]
    assert plugin["cfg"]["num_heads"] == 4
