import math

import pytest
import torch

from attnbench.attention.area_attention import (
    KEY_MODES, VALUE_MODES, AreaAttention1d, AreaAttention2d, AreaKeyCombiner, Areas, area_attention,
    count_areas)
from attnbench.flops import count_macs
from reference import padding, randomize

EPSILON = 1e-6


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    """The tensors here are tiny; a second thread only waits for a busy core (20x slower)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def every_area(height, width, max_height, max_width):
    """(top, left, h, w) of every area: by height, then width, then position row-major."""
    return [(top, left, h, w)
            for h in range(1, min(max_height, height) + 1) for w in range(1, min(max_width, width) + 1)
            for top in range(height - h + 1) for left in range(width - w + 1)]


def reference_area_attention(q, k, v, max_area_width, max_area_height=1, memory_height=1, key_mode="mean",
                             value_mode="sum", key_padding_mask=None, causal=False, top_k=0, combiner=None,
                             noise=None):
    """Float64 area attention that visits every area and sums its items directly."""
    q, k, v = (t.detach().double() for t in (q, k, v))
    p = {n: t.detach().double() for n, t in combiner.state_dict().items()} if combiner else {}
    b, heads, num_q, d = q.shape
    width = k.shape[2] // memory_height
    keys, values, hidden = [], [], []
    for a, (top, left, h, w) in enumerate(every_area(memory_height, width, max_area_height, max_area_width)):
        items = [(top + r) * width + left + c for r in range(h) for c in range(w)]
        k_items, v_items = k[:, :, items], v[:, :, items]  # (B, heads, n, d)
        mean = k_items.sum(2) / len(items)
        std = (((k_items - mean[:, :, None]) ** 2).sum(2) / len(items) + EPSILON).sqrt()
        sample = mean if noise is None else mean + std * noise[:, :, a]
        if key_mode == "mean":
            key = mean
        elif key_mode == "max":
            key = k_items.amax(2)
        elif key_mode == "sample":
            key = sample
        else:
            size = torch.cat([p["height_embedding.weight"][h - 1], p["width_embedding.weight"][w - 1]])
            size = size.expand_as(mean)
            z = {"concat": [mean, std, size], "max_concat": [k_items.amax(2), size], "sum": [mean + std + size],
                 "sample_concat": [sample, size], "sample_sum": [sample + size]}[key_mode]
            z = torch.relu(torch.cat(z, -1) @ p["hidden.weight"].T + p["hidden.bias"])
            key = z @ p["output.weight"].T + p["output.bias"]
        keys.append(key)
        values.append({"sum": v_items.sum(2), "mean": v_items.mean(2), "max": v_items.amax(2)}[value_mode])
        area_hidden = torch.zeros(b, num_q, dtype=torch.bool)
        if key_padding_mask is not None:
            area_hidden |= key_padding_mask[:, items].any(1)[:, None]
        if causal:
            area_hidden |= (max(items) > torch.arange(num_q))[None]
        hidden.append(area_hidden)
    keys, values = torch.stack(keys, 2), torch.stack(values, 2)  # (B, heads, A, d)
    logits = torch.einsum("bhqd,bhad->bhqa", q, keys) / math.sqrt(d)
    logits = logits.masked_fill(torch.stack(hidden, -1)[:, None], float("-inf"))
    if top_k:
        kept = min(top_k, logits.shape[-1])
        kth = logits.sort(-1, descending=True).values[..., kept - 1:kept]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    return torch.einsum("bhqa,bhad->bhqd", logits.softmax(-1), values)


def combiner_for(key_mode, head_dim, max_area_width, max_area_height=1):
    if KEY_MODES[key_mode][1] is None:
        return None
    return randomize(AreaKeyCombiner(head_dim, max_area_width, max_area_height, key_mode)).double()


# name -> (area arguments, memory length, query length, padding lengths, causal)
LAYOUTS = {
    "1d": (dict(max_area_width=3), 6, 4, None, False),
    "1d_causal_padded": (dict(max_area_width=3), 6, 6, [6, 4], True),
    "2d_padded": (dict(max_area_width=3, max_area_height=2, memory_height=3), 12, 5, [12, 9], False),
    "2d_causal": (dict(max_area_width=2, max_area_height=2, memory_height=2), 6, 6, None, True),
}


def layout_inputs(layout, dtype=torch.float64, head_dim=4):
    area, num_keys, num_q, lengths, causal = LAYOUTS[layout]
    q, k, v = (torch.randn(2, 2, n, head_dim, dtype=dtype) for n in (num_q, num_keys, num_keys))
    mask = None if lengths is None else padding(lengths, num_keys)
    return q, k, v, dict(area, key_padding_mask=mask, causal=causal)


def fast_and_reference(q, k, v, kwargs, key_mode, value_mode, top_k=0):
    area_size = (kwargs["max_area_width"], kwargs.get("max_area_height", 1))
    combiner = combiner_for(key_mode, q.shape[-1], *area_size)
    if combiner is not None:
        combiner.to(q.dtype)
    fast = area_attention(q, k, v, area_key_mode=key_mode, area_value_mode=value_mode, top_k_areas=top_k,
                          key_combiner=combiner, **kwargs)
    ref = reference_area_attention(q, k, v, key_mode=key_mode, value_mode=value_mode, top_k=top_k,
                                   combiner=combiner, **kwargs)
    return fast, ref


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("value_mode", VALUE_MODES)
@pytest.mark.parametrize("key_mode", KEY_MODES)
def test_matches_float64_reference(key_mode, value_mode, layout):
    fast, ref = fast_and_reference(*layout_inputs(layout), key_mode, value_mode)
    torch.testing.assert_close(fast, ref, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("key_mode", KEY_MODES)
def test_float32_close_to_reference(key_mode):
    fast, ref = fast_and_reference(*layout_inputs("2d_padded", torch.float32), key_mode, "mean")
    torch.testing.assert_close(fast.double(), ref, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("key_mode", ["mean", "max"])
@pytest.mark.parametrize("top_k", [1, 5, 1000])
def test_top_k_areas(top_k, key_mode, layout):
    fast, ref = fast_and_reference(*layout_inputs(layout), key_mode, "sum", top_k)
    torch.testing.assert_close(fast, ref, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("key_mode", ["sample", "sample_concat", "sample_sum"])
def test_sample_modes_add_std_noise_in_training_only(key_mode):
    q, k, v, kwargs = layout_inputs("2d_padded")
    combiner = combiner_for(key_mode, 4, 3, 2)
    kwargs = dict(kwargs, area_key_mode=key_mode, key_combiner=combiner)
    torch.manual_seed(1)
    trained = area_attention(q, k, v, training=True, **kwargs)
    torch.manual_seed(1)
    noise = torch.randn(2, 2, count_areas(4, 3, 3, 2), 4, dtype=torch.float64)
    ref = reference_area_attention(q, k, v, 3, 2, 3, key_mode, key_padding_mask=kwargs["key_padding_mask"],
                                   combiner=combiner, noise=noise)
    torch.testing.assert_close(trained, ref, rtol=1e-10, atol=1e-10)
    evaluated = area_attention(q, k, v, training=False, **kwargs)
    assert not torch.allclose(trained, evaluated)
    if key_mode == "sample":
        torch.testing.assert_close(evaluated, area_attention(q, k, v, **dict(kwargs, area_key_mode="mean")))


@pytest.mark.parametrize("length,max_width,expected", [(5, 3, 12), (8, 1, 8), (7, 7, 28), (512, 5, 2550)])
def test_number_of_areas_1d(length, max_width, expected):
    assert max_width * length - max_width * (max_width - 1) // 2 == expected
    assert count_areas(length, max_width) == expected == len(Areas.enumerate(1, length, 1, max_width))
    assert len(every_area(1, length, 1, max_width)) == expected


@pytest.mark.parametrize("height,width,max_height,max_width", [(3, 4, 2, 3), (2, 2, 3, 3), (32, 32, 3, 3)])
def test_number_of_areas_2d(height, width, max_height, max_width):
    expected = len(every_area(height, width, max_height, max_width))
    assert count_areas(width, max_width, height, max_height) == expected
    assert len(Areas.enumerate(height, width, max_height, max_width)) == expected


def test_area_statistics_of_one_three_five():
    areas = Areas.enumerate(1, 3, 1, 3)  # [1], [3], [5], [1 3], [3 5], [1 3 5]
    x = torch.tensor([[1.0], [3.0], [5.0]], dtype=torch.float64)
    mean, std = areas.mean_and_std(x, epsilon=0.0)
    assert areas.sum(x)[-1].item() == 9.0 and mean[-1].item() == areas.mean(x)[-1].item() == 3.0
    assert std[-1].item() == pytest.approx(1.63299, abs=1e-5)
    assert std[-1].item() == pytest.approx(math.sqrt(8 / 3))
    torch.testing.assert_close(std[:, 0], torch.tensor([0, 0, 0, 1, 1, math.sqrt(8 / 3)], dtype=torch.float64))
    _, smoothed = areas.mean_and_std(x)
    assert smoothed[-1].item() == pytest.approx(math.sqrt(8 / 3 + EPSILON))


@pytest.mark.parametrize("height,width,max_height,max_width", [(1, 512, 1, 5), (32, 32, 3, 3)])
def test_float32_std_keeps_its_precision_over_long_memories(height, width, max_height, max_width):
    areas = Areas.enumerate(height, width, max_height, max_width)
    x = torch.randn(2, height * width, 8) + 3.0
    mean, std = areas.mean_and_std(x)
    exact_mean, exact_std = areas.mean_and_std(x.double(), epsilon=0.0)
    torch.testing.assert_close(mean.double(), exact_mean, rtol=0, atol=1e-5)
    torch.testing.assert_close(std.double(), (exact_std ** 2 + EPSILON).sqrt(), rtol=0, atol=1e-5)
    assert std.dtype == torch.float32


def make_1d(key_mode="concat", value_mode="sum", dim=16, heads=4, max_area_width=3, **kwargs):
    return randomize(AreaAttention1d(dim, heads, max_area_width, key_mode, value_mode, **kwargs)).double()


def reference_1d(m, query, memory=None, causal=False, key_padding_mask=None):
    """Module forward from its parameters and the float64 reference."""
    p = {n: t.detach().double() for n, t in m.state_dict().items()}
    keys_in = query if memory is None else memory
    b, t, c = query.shape

    def heads(x, name):  # linear projection, (B, T, C) -> (B, heads, T, d)
        y = x @ p[name + ".weight"].T + p[name + ".bias"]
        return y.view(b, -1, m.num_heads, c // m.num_heads).transpose(1, 2)

    out = reference_area_attention(heads(query, "q_proj"), heads(keys_in, "k_proj"), heads(keys_in, "v_proj"),
                                   m.max_area_width, key_mode=m.area_key_mode, value_mode=m.area_value_mode,
                                   key_padding_mask=key_padding_mask, causal=causal, top_k=m.top_k_areas,
                                   combiner=m.key_combiner)
    return out.transpose(1, 2).reshape(b, t, c) @ p["out_proj.weight"].T + p["out_proj.bias"]


# top-k only with keys free of ties: the key MLP maps every area whose ReLU is dead to the same key
@pytest.mark.parametrize("key_mode,value_mode,top_k", [("mean", "sum", 6), ("concat", "max", 0),
                                                       ("sample_sum", "mean", 0)])
@pytest.mark.parametrize("mode", ["self", "causal", "cross"])
def test_module_1d_matches_reference(key_mode, value_mode, top_k, mode):
    m = make_1d(key_mode, value_mode, top_k_areas=top_k).eval()
    x = torch.randn(2, 6, 16, dtype=torch.float64)
    kwargs = dict(self=dict(key_padding_mask=padding([6, 4], 6)), causal=dict(causal=True),
                  cross=dict(memory=torch.randn(2, 8, 16, dtype=torch.float64),
                             key_padding_mask=padding([8, 5], 8)))[mode]
    torch.testing.assert_close(m(x, **kwargs), reference_1d(m, x, **kwargs), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("key_mode,kv_stride", [("mean", 1), ("max_concat", 2), ("sum", 2)])
def test_module_2d_matches_reference(key_mode, kv_stride):
    m = randomize(AreaAttention2d(8, 2, 3, 2, kv_stride, key_mode, "mean")).double()
    x = torch.randn(2, 8, 5, 7, dtype=torch.float64)
    p = {n: t.detach().double() for n, t in m.state_dict().items()}

    def conv(name, inp):  # 1x1 convolution
        return torch.einsum("oc,nchw->nohw", p[name + ".weight"][:, :, 0, 0], inp) + p[name + ".bias"][:, None, None]

    heads = lambda y: y.reshape(2, 2, 4, -1).transpose(2, 3)  # noqa: E731
    memory = x[:, :, ::kv_stride, ::kv_stride]
    out = reference_area_attention(heads(conv("query_conv", x)), heads(conv("key_conv", memory)),
                                   heads(conv("value_conv", memory)), 3, 2, memory.shape[2], key_mode, "mean",
                                   combiner=m.key_combiner)
    expected = x + p["gamma"] * conv("out_conv", out.transpose(2, 3).reshape(2, 8, 5, 7))
    torch.testing.assert_close(m(x), expected, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("key_mode,value_mode", [("mean", "sum"), ("max", "max"), ("concat", "mean"),
                                                 ("sample_concat", "sum")])
def test_causal_mask_hides_the_future(key_mode, value_mode):
    m = make_1d(key_mode, value_mode).eval()
    x = torch.randn(2, 8, 16, dtype=torch.float64)
    y = x.clone()
    y[:, 5:] = torch.randn(2, 3, 16, dtype=torch.float64)
    torch.testing.assert_close(m(x, causal=True)[:, :5], m(y, causal=True)[:, :5], rtol=1e-12, atol=1e-12)
    assert not torch.allclose(m(x, causal=True)[:, 5:], m(y, causal=True)[:, 5:])


@pytest.mark.parametrize("key_mode", ["mean", "max_concat"])
def test_padding_mask_hides_areas_touching_padding(key_mode):
    m = make_1d(key_mode, "max").eval()
    x, mem = torch.randn(2, 4, 16, dtype=torch.float64), torch.randn(2, 7, 16, dtype=torch.float64)
    mask = padding([7, 5], 7)
    changed = mem.clone()
    changed[1, 5:] = 100 * torch.randn(2, 16, dtype=torch.float64)
    torch.testing.assert_close(m(x, mem, key_padding_mask=mask), m(x, changed, key_padding_mask=mask))
    q, k, v, kwargs = layout_inputs("2d_padded")
    k2, v2 = k.clone(), v.clone()
    k2[1, :, 9:], v2[1, :, 9:] = 100.0, -100.0
    torch.testing.assert_close(area_attention(q, k, v, **kwargs), area_attention(q, k2, v2, **kwargs))


class FunctionalAreaAttention(torch.nn.Module):
    """``area_attention`` with its key combiner as a submodule, for ``torch.func.functional_call``."""

    def __init__(self, key_combiner, **kwargs):
        super().__init__()
        self.key_combiner, self.kwargs = key_combiner, kwargs

    def forward(self, q, k, v):
        return area_attention(q, k, v, key_combiner=self.key_combiner, **self.kwargs)


@pytest.mark.parametrize("area", [dict(max_area_width=2, causal=True),
                                  dict(max_area_width=2, max_area_height=2, memory_height=2, top_k_areas=5)])
@pytest.mark.parametrize("key_mode,value_mode", list(zip(KEY_MODES, [*VALUE_MODES] * 3)))
def test_gradcheck(key_mode, value_mode, area):
    m = FunctionalAreaAttention(combiner_for(key_mode, 2, 2, 2), area_key_mode=key_mode,
                                area_value_mode=value_mode, **area)
    names = [n for n, _ in m.named_parameters()]
    q, k, v = (torch.randn(1, 2, n, 2, dtype=torch.float64, requires_grad=True) for n in (3, 6, 6))
    fn = lambda q, k, v, *ps: torch.func.functional_call(m, dict(zip(names, ps)), (q, k, v))  # noqa: E731
    assert torch.autograd.gradcheck(fn, (q, k, v, *m.parameters()))


@pytest.mark.parametrize("key_mode,top_k", [("mean", 0), ("concat", 0), ("max_concat", 4)])
@pytest.mark.parametrize("memory_len", [None, 11])
def test_macs_1d_match_flop_counter(key_mode, top_k, memory_len):
    m = AreaAttention1d(32, 4, 3, key_mode, top_k_areas=top_k)
    x = torch.randn(2, 9, 32)
    mem = None if memory_len is None else torch.randn(2, memory_len, 32)
    measured = count_macs(m, x, mem, causal=mem is None)
    assert abs(m.macs(x, mem, causal=mem is None) - measured) <= 0.02 * measured


@pytest.mark.parametrize("key_mode,kv_stride", [("mean", 1), ("sum", 2), ("sample_concat", 1)])
def test_macs_2d_match_flop_counter(key_mode, kv_stride):
    m = AreaAttention2d(16, 4, 3, 2, kv_stride, key_mode)
    x = torch.randn(2, 16, 7, 6)
    measured = count_macs(m, x)
    assert abs(m.macs(x) - measured) <= 0.02 * measured


def _qkv(tq=4, tk=6, d=4):
    return torch.randn(2, 2, tq, d), torch.randn(2, 2, tk, d), torch.randn(2, 2, tk, d)


@pytest.mark.parametrize("kwargs,match", [
    (dict(max_area_width=0), "max_area_width must be a positive integer, got 0"),
    (dict(max_area_height=0), "max_area_height must be a positive integer, got 0"),
    (dict(memory_height=0), "memory_height must be a positive integer, got 0"),
    (dict(memory_height=4), r"key length 6 is not divisible by memory_height \(4\)"),
    (dict(area_key_mode="median"), "area_key_mode must be one of .* got 'median'"),
    (dict(area_value_mode="min"), "area_value_mode must be one of .* got 'min'"),
    (dict(q=torch.randn(2, 4, 4)), r"q, k and v must be \(B, heads, T, d\)"),
    (dict(q=torch.randn(2, 2, 4, 3)), "do not match"),
    (dict(v=torch.randn(2, 2, 5, 4)), "do not match"),
    (dict(key_padding_mask=torch.zeros(2, 5, dtype=torch.bool)), r"key_padding_mask .* \(B, Tk\) = \(2, 6\)"),
    (dict(key_padding_mask=torch.zeros(2, 6)), "key_padding_mask must be a bool tensor"),
    (dict(top_k_areas=-1), "top_k_areas must be a non-negative integer"),
    (dict(dropout_p=1.0), r"dropout_p must be in \[0, 1\)"),
    (dict(area_key_mode="concat"), "'concat' has learned parameters: pass key_combiner"),
    (dict(key_combiner=AreaKeyCombiner(4, 3)), "'mean' takes no key_combiner"),
    (dict(area_key_mode="sum", key_combiner=AreaKeyCombiner(4, 3)), "key_combiner is for area_key_mode 'concat'"),
    (dict(area_key_mode="concat", key_combiner=AreaKeyCombiner(4, 2)), "embeds areas up to 1 x 2, got .* 1 x 3"),
])
def test_functional_bad_input(kwargs, match):
    q, k, v = _qkv()
    args = dict(q=q, k=k, v=v, max_area_width=3) | kwargs
    with pytest.raises(ValueError, match=match):
        area_attention(**args)


@pytest.mark.parametrize("build,match", [
    (lambda: AreaAttention1d(16, 3, 2), r"channels \(16\) must be a positive multiple of num_heads \(3\)"),
    (lambda: AreaAttention1d(16, 4, 0), "max_area_width must be a positive integer"),
    (lambda: AreaAttention1d(16, 4, 2, "median"), "area_key_mode must be one of"),
    (lambda: AreaAttention1d(16, 4, 2, dropout=1.0), "dropout"),
    (lambda: AreaAttention2d(16, 4, max_area_height=0), "max_area_height must be a positive integer"),
    (lambda: AreaAttention2d(16, 4, kv_stride=0), "kv_stride must be a positive integer, got 0"),
    (lambda: AreaAttention2d(16, 4, top_k_areas=-2), "top_k_areas"),
    (lambda: AreaKeyCombiner(4, 3, 1, "mean"), "area_key_mode must be one of .* got 'mean'"),
    (lambda: AreaAttention1d(16, 4, 2)(torch.randn(2, 5, 8)), r"query must be \(B, T, 16\)"),
    (lambda: AreaAttention1d(16, 4, 2)(torch.randn(2, 5, 16), torch.randn(3, 4, 16)), "memory must be"),
    (lambda: AreaAttention2d(16, 4)(torch.randn(1, 8, 4, 4)), r"x must be \(N, 16, H, W\)"),
])
def test_module_bad_input(build, match):
    with pytest.raises(ValueError, match=match):
        build()
