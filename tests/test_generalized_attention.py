import pytest
import torch

from attnbench.attention import ALL_FACTORS, AttentionFactors, GeneralizedAttention
from attnbench.attention.scores import SCORES
from attnbench.flops import count_macs
from reference import generalized_attention_2d

# (N, C, H, W), q_stride, kv_stride: square, h != w, odd sizes, strides 1..4
CASES = [
    ((2, 24, 7, 11), 1, 2),
    ((1, 24, 9, 9), 1, 1),
    ((1, 24, 5, 13), 2, 3),
    ((2, 24, 12, 6), 3, 1),
    ((1, 24, 10, 15), 4, 4),
]


def make(factors, heads=4, channels=24, **kwargs):
    m = GeneralizedAttention(channels, num_heads=heads, attention_type=factors, **kwargs)
    with torch.no_grad():
        m.gamma.fill_(0.7)  # 0 at init would hide the attention branch
        m.proj_conv.bias.normal_()
        for name in ("score_weight", "score_vector"):  # away from init (identity: the bilinear score is dot)
            if hasattr(m, name):
                getattr(m, name).normal_(std=0.5)
    return m


WITH_E1 = [f for f in ALL_FACTORS if f[0] == "1"]


@pytest.mark.parametrize("factors", ALL_FACTORS)
@pytest.mark.parametrize("shape,q_stride,kv_stride", CASES)
def test_matches_float64_reference(factors, shape, q_stride, kv_stride):
    m = make(factors, q_stride=q_stride, kv_stride=kv_stride, position_magnitude=2)
    x = torch.randn(shape)
    ref = generalized_attention_2d(m, x)
    torch.testing.assert_close(m(x).double(), ref, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(m.double()(x.double()), ref, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("factors", ALL_FACTORS)
def test_fused_implementation_matches_reference(factors):
    """The fused path ('auto' on CUDA) on CPU, against the same reference."""
    m = make(factors, q_stride=1, kv_stride=2, implementation="fused").double()
    x = torch.randn(2, 24, 7, 11, dtype=torch.float64)
    torch.testing.assert_close(m(x), generalized_attention_2d(m, x), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("factors", ["1111", "0110", "1000", "0010", "0001"])
@pytest.mark.parametrize("spatial_range,q_stride,kv_stride", [(0, 1, 1), (2, 1, 2), (3, 2, 3), (5, 1, 4)])
def test_spatial_range_matches_reference(factors, spatial_range, q_stride, kv_stride):
    m = make(factors, spatial_range=spatial_range, q_stride=q_stride, kv_stride=kv_stride).double()
    x = torch.randn(2, 24, 11, 14, dtype=torch.float64)
    torch.testing.assert_close(m(x), generalized_attention_2d(m, x), rtol=1e-10, atol=1e-10)


def test_spatial_range_is_local():
    """A pixel far outside the range of a query cannot change that query's output."""
    m = make("1111", spatial_range=2, kv_stride=1).double()
    x = torch.randn(1, 24, 12, 12, dtype=torch.float64)
    y = x.clone()
    y[:, :, 11, 11] += 5.0
    torch.testing.assert_close(m(x)[:, :, :5, :5], m(y)[:, :, :5, :5])
    assert not torch.allclose(m(x)[:, :, 10, 10], m(y)[:, :, 10, 10])


@pytest.mark.parametrize("factors", ALL_FACTORS)
def test_gradcheck(factors):
    m = make(factors, heads=2, channels=4, q_stride=1, kv_stride=2, spatial_range=-1).double()
    x = torch.randn(1, 4, 4, 5, dtype=torch.float64, requires_grad=True)
    params = [p for p in m.parameters()]
    assert torch.autograd.gradcheck(lambda x, *ps: torch.func.functional_call(
        m, dict(zip([n for n, _ in m.named_parameters()], ps)), (x,)), (x, *params))


@pytest.mark.parametrize("factors", ALL_FACTORS)
@pytest.mark.parametrize("shape,q_stride,kv_stride", CASES[:3])
def test_macs_match_flop_counter(factors, shape, q_stride, kv_stride):
    m = make(factors, q_stride=q_stride, kv_stride=kv_stride)
    x = torch.randn(shape)
    measured = count_macs(m, x)
    assert abs(m.macs(x) - measured) <= 0.02 * measured


@pytest.mark.parametrize("factors", WITH_E1)
@pytest.mark.parametrize("score", SCORES)
@pytest.mark.parametrize("hard", [0, 1, 3])
@pytest.mark.parametrize("spatial_range,q_stride,kv_stride", [(-1, 1, 2), (2, 2, 1)])
def test_scores_and_hard_attention_match_float64_reference(factors, score, hard, spatial_range, q_stride, kv_stride):
    m = make(factors, score=score, hard=hard, spatial_range=spatial_range, q_stride=q_stride,
             kv_stride=kv_stride, position_magnitude=2).double()
    x = torch.randn(2, 24, 7, 9, dtype=torch.float64)
    torch.testing.assert_close(m(x), generalized_attention_2d(m, x), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("factors", ["0010", "0111", "0001"])
@pytest.mark.parametrize("hard", [1, 4])
@pytest.mark.parametrize("spatial_range", [3, -1])  # 0010 at -1: one logit row shared by every query
def test_hard_attention_without_e1_matches_float64_reference(factors, hard, spatial_range):
    m = make(factors, hard=hard, spatial_range=spatial_range, kv_stride=1).double()
    x = torch.randn(1, 24, 6, 8, dtype=torch.float64)
    torch.testing.assert_close(m(x), generalized_attention_2d(m, x), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("score", SCORES)
@pytest.mark.parametrize("spatial_range", [-1, 1])
def test_scores_gradcheck(score, spatial_range):
    m = make("1110", heads=2, channels=4, kv_stride=1, spatial_range=spatial_range, score=score).double()
    x = torch.randn(1, 4, 3, 4, dtype=torch.float64, requires_grad=True)
    names = [n for n, _ in m.named_parameters()]
    assert torch.autograd.gradcheck(
        lambda x, *ps: torch.func.functional_call(m, dict(zip(names, ps)), (x,)), (x, *m.parameters()))


def test_hard_attention_passes_the_soft_gradient_straight_through():
    """What reaches the logits (query, key and position projections, E3's vector) is the soft module's
    gradient; the values are weighted by the hard weights."""
    hard, soft = make("1111", hard=2).double(), make("1111").double()
    soft.load_state_dict(hard.state_dict())
    x = torch.randn(2, 24, 5, 6, dtype=torch.float64)
    probe = torch.randn(2, 24, 5, 6, dtype=torch.float64)
    (hard(x) * probe).sum().backward()
    (soft(x) * probe).sum().backward()
    for name in ("query_conv.weight", "key_conv.weight", "appr_geom_fc_x.weight", "appr_bias"):
        torch.testing.assert_close(hard.get_parameter(name).grad, soft.get_parameter(name).grad)
    assert not torch.allclose(hard.value_conv.weight.grad, soft.value_conv.weight.grad)
    assert not torch.allclose(hard(x), soft(x))


@pytest.mark.parametrize("score", SCORES)
@pytest.mark.parametrize("hard", [0, 2])
@pytest.mark.parametrize("factors", ["1000", "1111", "1010"])
def test_materialised_logits_macs_match_flop_counter(score, hard, factors):
    m = make(factors, score=score, hard=hard, spatial_range=3)
    x = torch.randn(2, 24, 7, 11)
    measured = count_macs(m, x)
    assert abs(m.macs(x) - measured) <= 0.02 * measured


def test_an_odd_per_axis_position_embedding_matches_the_reference():
    m = make("1111", heads=3, channels=21, position_embedding_dim=10)  # 5 dimensions per axis, 7 per head
    x = torch.randn(1, 21, 6, 7)
    torch.testing.assert_close(m.double()(x.double()), generalized_attention_2d(m, x), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("kwargs,match", [
    (dict(attention_type="0000"), "enables no term"),
    (dict(attention_type="1012"), "four characters"),
    (dict(attention_type="111"), "four characters"),
    (dict(num_heads=5), "multiple of num_heads"),
    (dict(kv_stride=0), "kv_stride"),
    (dict(q_stride=1.5), "q_stride"),
    (dict(spatial_range=-2), "spatial_range"),
    (dict(spatial_range=1, kv_stride=4), "see no key"),
    (dict(implementation="flash"), "implementation"),
    (dict(score="cosine"), "score must be one of"),
    (dict(attention_type="0110", score="additive"), "lacks"),
    (dict(hard=-1), "hard must be"),
])
def test_bad_arguments(kwargs, match):
    args = dict(in_channels=24, num_heads=4) | kwargs
    with pytest.raises(ValueError, match=match):
        GeneralizedAttention(**args)


@pytest.mark.parametrize("shape", [(24, 5, 5), (1, 12, 5, 5), (1, 24, 5, 5, 1)])
def test_bad_input_shape(shape):
    with pytest.raises(ValueError, match=r"expected input \(N, 24, H, W\)"):
        make("1111")(torch.randn(shape))


def test_factor_parsing():
    f = AttentionFactors.parse("0110")
    assert (f.query_key, f.query_position, f.key, f.position) == (False, True, True, False)
    assert str(f) == "0110" and f.needs_query and f.needs_key and f.needs_position
    assert len(ALL_FACTORS) == 15 and len(set(ALL_FACTORS)) == 15 and "0000" not in ALL_FACTORS


def test_gamma_init_is_the_only_difference_and_reset_keeps_it():
    """``gamma_init`` sets the gate alone (every other weight as drawn) and ``reset_parameters`` restores it;
    what the gate does to training is test_gates.py's, for every gated mechanism."""
    torch.manual_seed(0)
    closed = GeneralizedAttention(24, num_heads=4, attention_type="1111")
    torch.manual_seed(0)
    opened = GeneralizedAttention(24, num_heads=4, attention_type="1111", gamma_init=0.5)
    assert closed.gamma.item() == 0 and opened.gamma.item() == 0.5
    x = torch.randn(2, 24, 6, 6)
    with torch.no_grad():
        closed.gamma.fill_(0.5)
    torch.testing.assert_close(opened(x), closed(x))  # the same weights but the gate
    closed.reset_parameters()
    opened.reset_parameters()
    assert closed.gamma.item() == 0 and opened.gamma.item() == 0.5
