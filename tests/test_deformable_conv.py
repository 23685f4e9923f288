import math
import re

import pytest
import torch
import torch.nn.functional as F
from torchvision.ops import deform_conv2d

from attnbench.attention.deformable_conv import DeformConv2d, ModulatedDeformConv2d
from attnbench.attention.deformable_conv1d import DeformConv1d
from attnbench.flops import count_macs
from reference import params64

pytestmark = pytest.mark.usefixtures("one_thread")


def tent(size: int, position: torch.Tensor) -> torch.Tensor:
    """Interpolation kernel g(r, position) = max(0, 1 - |r - position|) for r = 0..size-1, (..., size)."""
    grid = torch.arange(size, dtype=torch.float64)
    return (1 - (grid - position[..., None]).abs()).clamp(min=0)


def deform_conv2d_reference(m, x: torch.Tensor) -> torch.Tensor:
    """y(p) = b + sum_k w_k x(p0 + p_k + dp_k) [m_k], x(q) = sum_r g(r_y, q_y) g(r_x, q_x) x(r), float64."""
    p = params64(m)
    x = x.to(torch.float64)
    n, c, h, w = x.shape
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = m.kernel_size, m.stride, m.padding, m.dilation
    dg, groups, taps = m.deform_groups, m.groups, kh * kw
    branch = F.conv2d(x, p["conv_offset.weight"], p["conv_offset.bias"], m.stride, m.padding, m.dilation)
    h_out, w_out = branch.shape[2:]
    offset = branch[:, :2 * dg * taps].reshape(n, dg, taps, 2, h_out, w_out)  # (dy, dx) per group, tap
    mask = branch[:, 2 * dg * taps:].reshape(n, dg, taps, h_out, w_out).sigmoid() if m.modulated else 1.0
    tap_y, tap_x = [t.reshape(taps, 1, 1) for t in torch.meshgrid(
        torch.arange(kh), torch.arange(kw), indexing="ij")]
    pos_y = torch.arange(h_out)[:, None] * sh - ph + dh * tap_y + offset[:, :, :, 0]  # (n, dg, taps, ho, wo)
    pos_x = torch.arange(w_out)[None, :] * sw - pw + dw * tap_x + offset[:, :, :, 1]
    sampled = torch.einsum("ngkyxh,ngkyxw,ngchw->ngckyx", tent(h, pos_y), tent(w, pos_x),
                           x.view(n, dg, c // dg, h, w))
    sampled = (sampled * (mask[:, :, None] if m.modulated else mask)).reshape(
        n, groups, c // groups, taps, h_out, w_out)
    weight = p["weight"].reshape(groups, -1, c // groups, taps)
    out = torch.einsum("ngckyx,gock->ngoyx", sampled, weight).reshape(n, -1, h_out, w_out)
    return out + p["bias"][:, None, None] if "bias" in p else out


def deform_conv1d_reference(m, x: torch.Tensor) -> torch.Tensor:
    """y_t = b + sum_k W_k x(t + a_k + dt_{t,k}) (position <= t if causal), x(s) = sum_r g(r, s) x_r."""
    p = params64(m)
    x = x.to(torch.float64)
    b, t, c = x.shape
    k, dg, groups = m.kernel_size, m.deform_groups, m.groups
    first_tap = -(k - 1) if m.causal else -((k - 1) // 2)
    window = F.pad(x.transpose(1, 2), (-first_tap, k - 1 + first_tap))
    offset = F.conv1d(window, p["conv_offset.weight"], p["conv_offset.bias"]).view(b, dg, k, t)
    steps = torch.arange(t, dtype=torch.float64)
    position = steps + (torch.arange(k) + first_tap)[:, None] + offset  # (b, dg, k, t)
    if m.causal:
        position = torch.minimum(position, steps)
    sampled = torch.einsum("bgkts,bsgc->bgckt", tent(t, position), x.view(b, t, dg, c // dg))
    sampled = sampled.reshape(b, groups, c // groups, k, t)
    weight = p["weight"].view(groups, -1, c // groups, k)
    out = torch.einsum("bgckt,gock->btgo", sampled, weight).reshape(b, t, -1)
    return out + p["bias"] if "bias" in p else out


def randomise_offset_branch(m, spread: float = 1.5):
    """Offsets (and mask logits) of a few pixels, as after training; zero at init would hide them."""
    fan_in = m.conv_offset.weight[0].numel()
    with torch.no_grad():
        m.conv_offset.weight.normal_(0, spread / math.sqrt(fan_in))
        m.conv_offset.bias.uniform_(-spread, spread)
        if m.bias is not None:
            m.bias.normal_()
    return m


# (N, C_in, H, W), C_out, kernel, stride, padding, dilation, groups, deform_groups, bias
CASES_2D = [
    ((2, 8, 7, 9), 6, 3, 1, 1, 1, 1, 1, False),
    ((1, 8, 9, 6), 8, 3, 2, 1, 1, 2, 2, True),
    ((1, 6, 11, 10), 4, 3, 1, 2, 2, 1, 3, False),
    ((2, 4, 5, 8), 6, (3, 2), (2, 1), (0, 1), (1, 2), 2, 4, True),
    ((1, 3, 8, 7), 5, 1, 1, 0, 1, 1, 1, True),
]
MODULES_2D = [DeformConv2d, ModulatedDeformConv2d]


def make_2d(cls, shape, c_out, kernel, stride, padding, dilation, groups, deform_groups, bias):
    return randomise_offset_branch(cls(shape[1], c_out, kernel, stride, padding, dilation, groups,
                                       deform_groups, bias))


@pytest.mark.parametrize("cls", MODULES_2D)
@pytest.mark.parametrize("case", CASES_2D)
def test_deform_conv2d_matches_float64_reference(cls, case):
    m = make_2d(cls, *case)
    x = torch.randn(case[0])
    ref = deform_conv2d_reference(m, x)
    torch.testing.assert_close(m(x).double(), ref, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(m.double()(x.double()), ref, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("cls", MODULES_2D)
def test_deform_conv2d_gradcheck(cls):
    m = make_2d(cls, (1, 4, 5, 6), 4, 3, 1, 1, 1, 2, 2, True).double()
    x = torch.randn(1, 4, 5, 6, dtype=torch.float64, requires_grad=True)
    names, params = zip(*m.named_parameters())
    assert torch.autograd.gradcheck(
        lambda x, *ps: torch.func.functional_call(m, dict(zip(names, ps)), (x,)), (x, *params))


@pytest.mark.parametrize("randomised", [True, False], ids=["trained-offsets", "init-integer-locations"])
@pytest.mark.parametrize("cls", MODULES_2D)
@pytest.mark.parametrize("case", CASES_2D)
def test_cpu_gathered_columns_match_torchvision_kernel(cls, case, randomised):
    """The CPU path (bilinear gather + matmul) gives torchvision's value and every gradient, in float64,
    including the kernel's one-sided offset derivative where every location is an integer (zero offsets)."""
    m = (make_2d(cls, *case) if randomised else cls(case[0][1], *case[1:])).double()
    x = torch.randn(case[0], dtype=torch.float64)
    offset, mask = m._offset_and_mask(x)
    leaves = {name: t.detach() for name, t in dict(x=x, offset=offset, weight=m.weight, bias=m.bias,
                                                    mask=mask).items() if t is not None}

    def kernel(x, offset, weight, bias=None, mask=None):
        return deform_conv2d(x, offset, weight, bias, m.stride, m.padding, m.dilation, mask)

    def gathered(x, offset, weight, bias=None, mask=None):
        return m._conv_over_gathered_columns(x, offset, weight, bias, mask)

    results = []
    for conv in (kernel, gathered):
        inputs = {name: t.clone().requires_grad_() for name, t in leaves.items()}
        y = conv(**inputs)
        results.append((y, *torch.autograd.grad(y.pow(2).sum(), list(inputs.values()))))
    for kernel, gathered in zip(*results, strict=True):
        torch.testing.assert_close(gathered, kernel, rtol=1e-10, atol=1e-10)


def test_deform_conv2d_at_init_is_plain_conv():
    kwargs = dict(stride=2, padding=2, dilation=2, groups=2, deform_groups=2, bias=True)
    v1, v2 = DeformConv2d(8, 6, 3, **kwargs), ModulatedDeformConv2d(8, 6, 3, **kwargs)
    for m in (v1, v2):
        with torch.no_grad():
            m.bias.normal_()
    x = torch.randn(2, 8, 11, 9)
    conv = dict(stride=2, padding=2, dilation=2, groups=2)
    torch.testing.assert_close(v1(x), F.conv2d(x, v1.weight, v1.bias, **conv))
    torch.testing.assert_close(v2(x), 0.5 * F.conv2d(x, v2.weight, **conv) + v2.bias[:, None, None])


@pytest.mark.parametrize("cls", MODULES_2D)
@pytest.mark.parametrize("case", CASES_2D[:4])
def test_deform_conv2d_macs_match_flop_counter(cls, case):
    m = make_2d(cls, *case)
    x = torch.randn(case[0])
    measured = count_macs(m, x)
    assert measured > 0 and abs(m.macs(x) - measured) <= 0.02 * measured


@pytest.mark.parametrize("cls,maps", [(DeformConv2d, 2), (ModulatedDeformConv2d, 3)])
def test_deform_conv2d_mmdet_bottleneck_call_and_mmcv_names(cls, maps):
    # mmdet's Bottleneck: build_conv_layer(dict(type='DCN', deform_groups=2), planes, planes, kernel_size=3,
    # stride=stride, padding=dilation, dilation=dilation, bias=False)
    m = cls(16, 16, kernel_size=3, stride=2, padding=2, dilation=2, bias=False, deform_groups=2)
    shapes = {k: tuple(v.shape) for k, v in m.state_dict().items()}
    assert shapes == {"weight": (16, 16, 3, 3), "conv_offset.weight": (2 * maps * 9, 16, 3, 3),
                      "conv_offset.bias": (2 * maps * 9,)}
    positional = cls(16, 16, 3, 2, 2, 2, 1, 2, False)
    positional.load_state_dict(m.state_dict())
    x = torch.randn(1, 16, 9, 9)
    torch.testing.assert_close(positional(x), m(x))


# (B, T, C_in), C_out, kernel, groups, deform_groups, causal
CASES_1D = [
    ((2, 9, 8), 6, 3, 1, 1, False),
    ((1, 13, 8), 8, 4, 2, 4, False),
    ((2, 7, 6), 9, 5, 3, 2, True),
    ((1, 11, 4), 4, 2, 2, 2, True),
    ((2, 5, 3), 5, 1, 1, 1, True),
]


def make_1d(shape, c_out, kernel, groups, deform_groups, causal, spread=1.5):
    m = DeformConv1d(shape[2], c_out, kernel, groups, deform_groups, causal)
    return randomise_offset_branch(m, spread)


@pytest.mark.parametrize("case", CASES_1D)
def test_deform_conv1d_matches_float64_reference(case):
    m = make_1d(*case)
    x = torch.randn(case[0])
    ref = deform_conv1d_reference(m, x)
    torch.testing.assert_close(m(x).double(), ref, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(m.double()(x.double()), ref, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("causal", [False, True])
def test_deform_conv1d_gradcheck(causal):
    m = make_1d((1, 6, 4), 4, 3, 2, 2, causal).double()
    x = torch.randn(1, 6, 4, dtype=torch.float64, requires_grad=True)
    names, params = zip(*m.named_parameters())
    assert torch.autograd.gradcheck(
        lambda x, *ps: torch.func.functional_call(m, dict(zip(names, ps)), (x,)), (x, *params))


@pytest.mark.parametrize("kernel,causal,padding", [(3, False, (1, 1)), (4, False, (1, 2)), (4, True, (3, 0))])
def test_deform_conv1d_at_init_is_plain_conv(kernel, causal, padding):
    m = DeformConv1d(6, 4, kernel, groups=2, causal=causal)
    x = torch.randn(2, 10, 6)
    plain = F.conv1d(F.pad(x.transpose(1, 2), padding), m.weight, m.bias, groups=2).transpose(1, 2)
    torch.testing.assert_close(m(x), plain)


def test_deform_conv1d_causal_never_reads_later_inputs():
    m = make_1d((1, 12, 6), 6, 4, 2, 3, True, spread=3.0)  # many taps point past t and get clamped
    x = torch.randn(1, 12, 6)
    y = m(x)
    for step in range(12):
        later = x.clone()
        later[:, step:] = torch.randn(1, 12 - step, 6)
        torch.testing.assert_close(m(later)[:, :step], y[:, :step], rtol=0, atol=0)
        assert not torch.allclose(m(later)[:, step], y[:, step])
        later[:, step:] = float("nan")  # not even a zero-weight read of a later position
        torch.testing.assert_close(m(later)[:, :step], y[:, :step], rtol=0, atol=0)
    x.requires_grad_(True)
    for step in range(11):
        grad = torch.autograd.grad(m(x)[:, step].sum(), x)[0]
        assert grad[:, step + 1:].abs().max() == 0 and grad[:, step].abs().max() > 0


def test_deform_conv1d_non_causal_reads_both_sides():
    m = make_1d((1, 12, 6), 6, 3, 1, 1, False)
    x = torch.randn(1, 12, 6, requires_grad=True)
    grad = torch.autograd.grad(m(x)[:, 5].sum(), x)[0]
    assert grad[:, 6:].abs().max() > 0 and grad[:, :5].abs().max() > 0


@pytest.mark.parametrize("case", CASES_1D[:4])
def test_deform_conv1d_macs_match_flop_counter(case):
    m = make_1d(*case)
    x = torch.randn(case[0])
    measured = count_macs(m, x)
    assert measured > 0 and abs(m.macs(x) - measured) <= 0.02 * measured


GROUPS_8_6_4 = "in_channels (8) and out_channels (6) must be positive multiples of groups (4)"
DEFORM_GROUPS_8_3 = "in_channels (8) must be a positive multiple of deform_groups (3)"


@pytest.mark.parametrize("cls", MODULES_2D)
@pytest.mark.parametrize("args,kwargs,message", [
    ((8, 8, 0), {}, "kernel_size must be an int or a pair of ints >= 1, got 0"),
    ((8, 8, (3, 0)), {}, "kernel_size must be an int or a pair of ints >= 1, got (3, 0)"),
    ((8, 8, 3), dict(stride=0), "stride must be an int or a pair of ints >= 1, got 0"),
    ((8, 8, 3), dict(padding=-1), "padding must be an int or a pair of ints >= 0, got -1"),
    ((8, 8, 3), dict(dilation=1.5), "dilation must be an int or a pair of ints >= 1, got 1.5"),
    ((8, 8, 3), dict(groups=3),
     "in_channels (8) and out_channels (8) must be positive multiples of groups (3)"),
    ((8, 6, 3), dict(groups=4), GROUPS_8_6_4),
    ((8, 8, 3), dict(deform_groups=3), DEFORM_GROUPS_8_3),
])
def test_deform_conv2d_bad_arguments(cls, args, kwargs, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        cls(*args, **kwargs)


@pytest.mark.parametrize("cls", MODULES_2D)
@pytest.mark.parametrize("shape,message", [
    ((8, 5, 5), "expected input (N, 8, H, W), got (8, 5, 5)"),
    ((1, 4, 5, 5), "expected input (N, 8, H, W), got (1, 4, 5, 5)"),
    ((1, 8, 2, 5), "input 2x5 is too small for kernel (3, 3) with padding (0, 0) and dilation (1, 1)"),
])
def test_deform_conv2d_bad_input(cls, shape, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        cls(8, 8, 3)(torch.randn(shape))


@pytest.mark.parametrize("args,kwargs,message", [
    ((8, 8, 0), {}, "kernel_size must be a positive integer, got 0"),
    ((8, 8, 2.5), {}, "kernel_size must be a positive integer, got 2.5"),
    ((8, 6, 3), dict(groups=4), GROUPS_8_6_4),
    ((8, 8, 3), dict(deform_groups=3), DEFORM_GROUPS_8_3),
])
def test_deform_conv1d_bad_arguments(args, kwargs, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        DeformConv1d(*args, **kwargs)


@pytest.mark.parametrize("shape", [(1, 8, 10), (10, 8), (1, 10, 8, 1)])
def test_deform_conv1d_bad_input(shape):
    with pytest.raises(ValueError, match=re.escape(f"expected input (B, T, 8), got {shape}")):
        DeformConv1d(8, 8, 3)(torch.randn(shape))
