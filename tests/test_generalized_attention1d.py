import math

import pytest
import torch
import torch.nn.functional as F

from attnbench.attention import ALL_FACTORS, GeneralizedAttention1d
from attnbench.attention.scores import SCORES
from attnbench.flops import count_macs
from reference import generalized_attention_1d, padding, randomize


def make(factors, dim=16, heads=4, **kwargs):
    return randomize(GeneralizedAttention1d(dim, heads, factors, **kwargs))


@pytest.mark.parametrize("factors", ALL_FACTORS)
@pytest.mark.parametrize("mode", ["self", "causal", "cross", "incremental"])
@pytest.mark.parametrize("window", [-1, 0, 2])
def test_matches_float64_reference(factors, mode, window):
    m = make(factors, position_dim=10, window=window)
    x = torch.randn(2, 6, 16)
    kwargs = {}
    if mode == "causal":
        kwargs = dict(causal=True)
    elif mode == "cross":
        kwargs = dict(memory=torch.randn(2, 9, 16), key_padding_mask=padding([9, 4], 9))
    elif mode == "incremental":  # last 2 steps of a 6-step prefix
        kwargs = dict(memory=x, causal=True, query_offset=4)
        x = x[:, 4:]
    elif mode == "self":
        kwargs = dict(key_padding_mask=padding([6, 3], 6))
    ref = generalized_attention_1d(m, x, **kwargs)
    torch.testing.assert_close(m(x, **kwargs).double(), ref, rtol=1e-4, atol=1e-4)
    kwargs = {k: (v.double() if torch.is_tensor(v) and v.is_floating_point() else v) for k, v in kwargs.items()}
    torch.testing.assert_close(m.double()(x.double(), **kwargs), ref, rtol=1e-10, atol=1e-10)


def test_e1_alone_is_scaled_dot_product_attention():
    m = make("1000").double()
    x, mem = torch.randn(2, 5, 16, dtype=torch.float64), torch.randn(2, 7, 16, dtype=torch.float64)
    heads = lambda t: t.view(2, -1, 4, 4).transpose(1, 2)  # noqa: E731
    q, k, v = heads(m.q_proj(x)), heads(m.k_proj(mem)), heads(m.v_proj(mem))
    expected = F.scaled_dot_product_attention(q, k, v, scale=1 / math.sqrt(4))
    expected = m.out_proj(expected.transpose(1, 2).reshape(2, 5, 16))
    torch.testing.assert_close(m(x, mem), expected)
    mha = torch.nn.MultiheadAttention(16, 4, batch_first=True).double()
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.cat([m.q_proj.weight, m.k_proj.weight, m.v_proj.weight]))
        mha.in_proj_bias.copy_(torch.cat([m.q_proj.bias, m.k_proj.bias, m.v_proj.bias]))
        mha.out_proj.load_state_dict(m.out_proj.state_dict())
    torch.testing.assert_close(m(x, mem), mha(x, mem, mem, need_weights=False)[0])


@pytest.mark.parametrize("factors", ALL_FACTORS)
def test_causal_mask_hides_the_future(factors):
    m = make(factors).double()
    x = torch.randn(2, 8, 16, dtype=torch.float64)
    y = x.clone()
    y[:, 5:] = torch.randn(2, 3, 16, dtype=torch.float64)
    torch.testing.assert_close(m(x, causal=True)[:, :5], m(y, causal=True)[:, :5])
    assert not torch.allclose(m(x, causal=True)[:, 5:], m(y, causal=True)[:, 5:])


@pytest.mark.parametrize("factors", ALL_FACTORS)
def test_padding_mask_hides_padded_keys(factors):
    m = make(factors).double()
    x, mem = torch.randn(2, 4, 16, dtype=torch.float64), torch.randn(2, 7, 16, dtype=torch.float64)
    mask = padding([7, 5], 7)
    changed = mem.clone()
    changed[1, 5:] = 100 * torch.randn(2, 16, dtype=torch.float64)
    torch.testing.assert_close(m(x, mem, key_padding_mask=mask), m(x, changed, key_padding_mask=mask))


WITH_E1 = [f for f in ALL_FACTORS if f[0] == "1"]


@pytest.mark.parametrize("factors", WITH_E1)
@pytest.mark.parametrize("score", SCORES)
@pytest.mark.parametrize("hard", [0, 1, 3])
@pytest.mark.parametrize("mode", ["causal", "cross"])
def test_scores_and_hard_attention_match_float64_reference(factors, score, hard, mode):
    m = make(factors, position_dim=10, score=score, hard=hard)
    x = torch.randn(2, 6, 16, dtype=torch.float64)
    kwargs = dict(causal=True) if mode == "causal" else dict(
        memory=torch.randn(2, 9, 16, dtype=torch.float64), key_padding_mask=padding([9, 2], 9))
    ref = generalized_attention_1d(m, x, **kwargs)
    torch.testing.assert_close(m.double()(x, **kwargs), ref, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("score", SCORES)
def test_scores_gradcheck(score):
    m = make("1100", dim=4, heads=2, score=score).double()
    x = torch.randn(1, 3, 4, dtype=torch.float64, requires_grad=True)
    names = [n for n, _ in m.named_parameters()]
    fn = lambda x, *ps: torch.func.functional_call(m, dict(zip(names, ps)), (x,), {"causal": True})  # noqa: E731
    assert torch.autograd.gradcheck(fn, (x, *m.parameters()))


def test_hard_attention_passes_the_soft_gradient_straight_through():
    """The weights' gradient is the soft weights' (straight through): what reaches the logits, here
    the query and key projections, is the soft module's; the values are weighted by the hard weights."""
    hard, soft = make("1010", hard=2).double(), make("1010").double()
    soft.load_state_dict(hard.state_dict())
    x = torch.randn(2, 5, 16, dtype=torch.float64)
    probe = torch.randn(2, 5, 16, dtype=torch.float64)
    (hard(x) * probe).sum().backward()
    (soft(x) * probe).sum().backward()
    for name in ("q_proj", "k_proj", "content_bias"):
        grad = lambda m: m.get_parameter(f"{name}.weight" if name.endswith("proj") else name).grad  # noqa: E731
        torch.testing.assert_close(grad(hard), grad(soft))
    assert not torch.allclose(hard.v_proj.weight.grad, soft.v_proj.weight.grad)
    assert not torch.allclose(hard(x), soft(x))


@pytest.mark.parametrize("factors", ["1000", "0100", "1111"])
@pytest.mark.parametrize("hard", [0, 1])
def test_a_query_that_sees_no_key_gets_zeros_and_finite_gradients(factors, hard):
    """Padded queries whose window holds padding only: no NaN forward or backward (training diverged)."""
    m = make(factors, window=1, hard=hard).double()
    x = torch.randn(2, 6, 16, dtype=torch.float64, requires_grad=True)
    mask = padding([6, 2], 6)  # queries 4 and 5 of the second sentence see padding only
    out = m(x, key_padding_mask=mask)
    torch.testing.assert_close(out[1, 4:], m.out_proj.bias.expand(2, -1))  # zeros before the projection
    out.sum().backward()
    assert x.grad.isfinite().all() and all(p.grad.isfinite().all() for p in m.parameters() if p.grad is not None)


def test_window_keeps_the_keys_within_range():
    """Keys farther than the window from the query do not change its output; nearer ones do."""
    m = make("0100", window=2).double()
    x = torch.randn(1, 9, 16, dtype=torch.float64)
    far, near = x.clone(), x.clone()
    far[:, 7:] = torch.randn(1, 2, 16, dtype=torch.float64)  # 3 or more steps after query 4
    near[:, 6] = torch.randn(16, dtype=torch.float64)  # 2 steps after query 4
    torch.testing.assert_close(m(x)[:, 4], m(far)[:, 4])
    assert not torch.allclose(m(x)[:, 4], m(near)[:, 4])


@pytest.mark.parametrize("factors", ALL_FACTORS)
@pytest.mark.parametrize("window", [-1, 1])
def test_gradcheck(factors, window):
    m = make(factors, dim=4, heads=2, window=window).double()
    x = torch.randn(1, 3, 4, dtype=torch.float64, requires_grad=True)
    names = [n for n, _ in m.named_parameters()]
    fn = lambda x, *ps: torch.func.functional_call(m, dict(zip(names, ps)), (x,), {"causal": True})  # noqa: E731
    assert torch.autograd.gradcheck(fn, (x, *m.parameters()))


@pytest.mark.parametrize("factors,score", [(f, "scaled_dot") for f in ALL_FACTORS]
                         + [(f, score) for f in WITH_E1 for score in SCORES[1:]])
@pytest.mark.parametrize("memory_len", [None, 11])
def test_macs_match_flop_counter(factors, memory_len, score):
    m = make(factors, dim=32, heads=4, score=score)
    x = torch.randn(2, 9, 32)
    mem = None if memory_len is None else torch.randn(2, memory_len, 32)
    measured = count_macs(m, x, mem, causal=mem is None)
    assert abs(m.macs(x, mem, causal=mem is None) - measured) <= 0.02 * measured


@pytest.mark.parametrize("call,match", [
    (lambda m: m(torch.randn(2, 5)), r"query must be \(B, T, 16\)"),
    (lambda m: m(torch.randn(2, 5, 8)), r"query must be \(B, T, 16\)"),
    (lambda m: m(torch.randn(2, 5, 16), torch.randn(3, 4, 16)), "memory must be"),
    (lambda m: m(torch.randn(2, 5, 16), key_padding_mask=torch.zeros(2, 4, dtype=torch.bool)), "key_padding_mask"),
    (lambda m: m(torch.randn(2, 5, 16), key_padding_mask=torch.zeros(2, 5)), "key_padding_mask"),
])
def test_bad_input(call, match):
    with pytest.raises(ValueError, match=match):
        call(make("1111"))


@pytest.mark.parametrize("kwargs,match", [
    (dict(attention_type="0000"), "no term"), (dict(num_heads=3), "multiple"), (dict(dropout=1.0), "dropout"),
    (dict(window=-2), "window"), (dict(score="cosine"), "score must be"),
    (dict(attention_type="0110", score="dot"), "lacks"), (dict(hard=-1), "hard")])
def test_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        GeneralizedAttention1d(**(dict(embed_dim=16, num_heads=4) | kwargs))
