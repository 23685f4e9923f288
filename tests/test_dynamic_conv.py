import pytest
import torch

from attnbench.attention.dynamic_conv import DynamicConv1d, LightweightConv1d, dynamic_conv1d, resolve_path
from attnbench.attention.dynamic_conv2d import DynamicConv2d
from attnbench.flops import count_macs
from reference import padding, params64, randomize

CLASSES_1D = [LightweightConv1d, DynamicConv1d]
PATHS = ["unfold", "band"]


def conv1d_reference(m, x, key_padding_mask=None):
    """y[t, c] = sum_j W[t, h(c), j] x[t + j - P, c], one step and one tap at a time, in float64."""
    p = params64(m)
    x = x.to(torch.float64)
    if key_padding_mask is not None:
        x = x.masked_fill(key_padding_mask[..., None], 0.0)
    b, t, c = x.shape
    heads, k = m.num_heads, m.kernel_size
    left = k - 1 if m.causal else k // 2
    head_of_channel = torch.arange(c) // (c // heads)
    y = torch.zeros(b, t, c, dtype=torch.float64)
    for i in range(t):
        if isinstance(m, DynamicConv1d):
            kernel = (x[:, i] @ p["kernel_proj.weight"].T).view(b, heads, k)
        else:
            kernel = p["weight"].expand(b, heads, k)
        if m.weight_softmax:
            kernel = kernel.softmax(-1)
        for j in range(k):
            s = i + j - left
            if 0 <= s < t:
                y[:, i] += kernel[:, head_of_channel, j] * x[:, s]
    return y + p["bias"] if "bias" in p else y


def conv2d_reference(m, x):
    """x + gamma * W_out sum_j softmax_j(W_K x_p) (W_V x)_{p + o_j}, one pixel and one tap at a time."""
    p = params64(m)
    x = x.to(torch.float64)
    n, c, h, w = x.shape
    k, heads, dil = m.kernel_size, m.num_heads, m.dilation
    head_of_channel = torch.arange(c) // (c // heads)

    def conv1x1(name, inp):
        return torch.einsum("oc,nchw->nohw", p[name + ".weight"][:, :, 0, 0], inp)

    logits, value = conv1x1("kernel_conv", x), conv1x1("value_conv", x)
    out = torch.zeros(n, c, h, w, dtype=torch.float64)
    for py in range(h):
        for px in range(w):
            kernel = logits[:, :, py, px].view(n, heads, k * k).softmax(-1)
            for a in range(k):
                for b in range(k):
                    sy, sx = py + dil * (a - k // 2), px + dil * (b - k // 2)
                    if 0 <= sy < h and 0 <= sx < w:
                        out[:, :, py, px] += kernel[:, head_of_channel, a * k + b] * value[:, :, sy, sx]
    out = conv1x1("proj_conv", out) + p["proj_conv.bias"][None, :, None, None]
    return x + p["gamma"] * out


def make1d(cls, dim=16, heads=4, kernel_size=3, **kwargs):
    return randomize(cls(dim, kernel_size, heads, **kwargs))


@pytest.mark.parametrize("cls", CLASSES_1D)
@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("kernel_size", [1, 4, 5])
@pytest.mark.parametrize("length", [3, 9])
def test_1d_matches_float64_reference(cls, path, causal, kernel_size, length):
    m = make1d(cls, kernel_size=kernel_size, causal=causal, path=path)
    x = torch.randn(2, length, 16)
    ref = conv1d_reference(m, x)
    torch.testing.assert_close(m(x).double(), ref, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(m.double()(x.double()), ref, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("cls", CLASSES_1D)
@pytest.mark.parametrize("path", PATHS)
def test_1d_without_softmax_with_bias(cls, path):
    m = make1d(cls, kernel_size=4, weight_softmax=False, bias=True, path=path).double()
    x = torch.randn(2, 7, 16, dtype=torch.float64)
    torch.testing.assert_close(m(x), conv1d_reference(m, x), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("cls", CLASSES_1D)
@pytest.mark.parametrize("path", PATHS)
def test_1d_padding_mask_zeroes_padded_steps(cls, path):
    m = make1d(cls, kernel_size=5, path=path).double()
    x = torch.randn(2, 8, 16, dtype=torch.float64)
    mask = padding([8, 5], 8)
    torch.testing.assert_close(m(x, mask), conv1d_reference(m, x, mask), rtol=1e-10, atol=1e-10)
    changed = x.clone()
    changed[1, 5:] = 100 * torch.randn(3, 16, dtype=torch.float64)
    torch.testing.assert_close(m(changed, mask), m(x, mask))


@pytest.mark.parametrize("cls", CLASSES_1D)
@pytest.mark.parametrize("path", PATHS)
def test_1d_causal_hides_the_future(cls, path):
    m = make1d(cls, kernel_size=4, causal=True, path=path).double()
    x = torch.randn(2, 8, 16, dtype=torch.float64)
    y = x.clone()
    y[:, 5:] = torch.randn(2, 3, 16, dtype=torch.float64)
    torch.testing.assert_close(m(x)[:, :5], m(y)[:, :5])
    assert not torch.allclose(m(x)[:, 5:], m(y)[:, 5:])


@pytest.mark.parametrize("cls", CLASSES_1D)
def test_1d_paths_share_the_weight_dropout(cls):
    m = make1d(cls, kernel_size=3, weight_dropout=0.5).train()
    x = torch.randn(2, 6, 16)
    out = {}
    for path in PATHS:
        m.path = path
        torch.manual_seed(1)
        out[path] = m(x)
    torch.testing.assert_close(out["unfold"], out["band"])
    assert not torch.allclose(out["band"], m.eval()(x))


def test_lightweight_drop_connect_is_drawn_per_step():
    m = LightweightConv1d(4, 1, 2, weight_dropout=0.5).train()  # k = 1: softmax kernel is 1
    y = m(torch.ones(3, 50, 4))
    assert set(y.unique().tolist()) == {0.0, 2.0}
    per_step = y[:, :, 0]  # channel 0 of head 0, over batch and time
    assert (per_step == 0).any(dim=1).all() and (per_step == 2).any(dim=1).all()


@pytest.mark.parametrize("cls", CLASSES_1D)
@pytest.mark.parametrize("path", PATHS)
def test_1d_gradcheck(cls, path):
    m = make1d(cls, dim=4, heads=2, kernel_size=3, causal=path == "band", bias=True, path=path).double()
    x = torch.randn(1, 4, 4, dtype=torch.float64, requires_grad=True)
    names = [n for n, _ in m.named_parameters()]
    fn = lambda x, *ps: torch.func.functional_call(m, dict(zip(names, ps)), (x,))  # noqa: E731
    assert torch.autograd.gradcheck(fn, (x, *m.parameters()))


@pytest.mark.parametrize("cls", CLASSES_1D)
@pytest.mark.parametrize("path", PATHS)
def test_1d_macs_match_flop_counter(cls, path):
    m = cls(32, 7, 4, path=path)
    x = torch.randn(2, 20, 32)
    measured = count_macs(m, x)
    assert abs(m.macs(x) - measured) <= 0.02 * measured


def test_auto_path_switches_to_unfold_past_512_steps():
    assert resolve_path("auto", 512) == "band" and resolve_path("auto", 513) == "unfold"
    assert resolve_path("band", 10_000) == "band" and resolve_path("unfold", 2) == "unfold"
    m = LightweightConv1d(8, 3, 2)
    assert m.macs(torch.empty(1, 512, 8, device="meta")) == 512 * 512 * 8
    assert m.macs(torch.empty(1, 513, 8, device="meta")) == 513 * 3 * 8


@pytest.mark.parametrize("kernel_size,dilation", [(3, 1), (3, 2), (2, 1)])
def test_2d_matches_float64_reference(kernel_size, dilation):
    m = randomize(DynamicConv2d(16, kernel_size, num_heads=4, dilation=dilation))
    x = torch.randn(2, 16, 5, 6)
    ref = conv2d_reference(m, x)
    torch.testing.assert_close(m(x).double(), ref, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(m.double()(x.double()), ref, rtol=1e-10, atol=1e-10)


def test_2d_gradcheck():
    m = randomize(DynamicConv2d(4, 3, num_heads=2, dilation=2)).double()
    x = torch.randn(1, 4, 3, 4, dtype=torch.float64, requires_grad=True)
    names = [n for n, _ in m.named_parameters()]
    fn = lambda x, *ps: torch.func.functional_call(m, dict(zip(names, ps)), (x,))  # noqa: E731
    assert torch.autograd.gradcheck(fn, (x, *m.parameters()))


def test_2d_macs_match_flop_counter():
    m = DynamicConv2d(32, 3, num_heads=4)
    x = torch.randn(2, 32, 7, 9)
    measured = count_macs(m, x)
    assert abs(m.macs(x) - measured) <= 0.02 * measured


@pytest.mark.parametrize("cls", CLASSES_1D)
@pytest.mark.parametrize("kwargs,match", [
    (dict(kernel_size=0), r"kernel_size must be >= 1, got 0"),
    (dict(num_heads=3), r"embed_dim \(16\) must be a positive multiple of num_heads \(3\)"),
    (dict(weight_dropout=1.0), r"weight_dropout must be in \[0, 1\), got 1.0"),
    (dict(path="fft"), r"path must be one of \('auto', 'unfold', 'band'\), got 'fft'"),
])
def test_1d_bad_arguments(cls, kwargs, match):
    with pytest.raises(ValueError, match=match):
        cls(**(dict(embed_dim=16, kernel_size=3, num_heads=4) | kwargs))


@pytest.mark.parametrize("cls", CLASSES_1D)
@pytest.mark.parametrize("args,match", [
    ((torch.randn(5, 16),), r"x must be \(B, T, 16\), got \(5, 16\)"),
    ((torch.randn(2, 5, 8),), r"x must be \(B, T, 16\), got \(2, 5, 8\)"),
    ((torch.randn(2, 5, 16), torch.zeros(2, 4, dtype=torch.bool)),
     r"key_padding_mask must be a bool tensor of shape \(B, T\) = \(2, 5\), got torch.bool \(2, 4\)"),
    ((torch.randn(2, 5, 16), torch.zeros(2, 5)),
     r"key_padding_mask must be a bool tensor of shape \(B, T\) = \(2, 5\), got torch.float32 \(2, 5\)"),
])
def test_1d_bad_input(cls, args, match):
    with pytest.raises(ValueError, match=match):
        cls(16, 3, 4)(*args)


@pytest.mark.parametrize("weight,padding_l,match", [
    (torch.randn(1, 1, 3, 3), 1, r"weight must be \(B or 1, T or 1, H, k\) .*got \(1, 1, 3, 3\)"),
    (torch.randn(1, 4, 4, 3), 1, r"weight must be .*got \(1, 4, 4, 3\)"),
    (torch.randn(1, 1, 4, 3), 3, r"padding_l must be in \[0, k - 1\] = \[0, 2\], got 3"),
])
def test_functional_bad_input(weight, padding_l, match):
    with pytest.raises(ValueError, match=match):
        dynamic_conv1d(torch.randn(2, 5, 16), weight, padding_l)


@pytest.mark.parametrize("kwargs,match", [
    (dict(kernel_size=0), r"kernel_size must be >= 1, got 0"),
    (dict(dilation=0), r"dilation must be >= 1, got 0"),
    (dict(num_heads=3), r"in_channels \(16\) must be a positive multiple of num_heads \(3\)"),
])
def test_2d_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        DynamicConv2d(**(dict(in_channels=16, num_heads=4) | kwargs))


@pytest.mark.parametrize("shape", [(2, 16, 5), (2, 8, 5, 5)])
def test_2d_bad_input(shape):
    with pytest.raises(ValueError, match=rf"expected input \(N, 16, H, W\), got \({', '.join(map(str, shape))}\)"):
        DynamicConv2d(16, num_heads=4)(torch.randn(*shape))
