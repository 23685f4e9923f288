"""attnbench's GeneralizedAttention against mmcv's, on mmcv's own weights."""
import pytest
import torch
from mmcv.cnn.bricks import GeneralizedAttention as MMCVGeneralizedAttention

from attnbench.attention import ALL_FACTORS, GeneralizedAttention

# mmcv's branch for E2 without E4 permutes the query wrongly for the y axis.
MMCV_BROKEN = {"0100", "0110", "1100", "1110"}


def pair(factors, channels=32, heads=4, **kwargs):
    ref = MMCVGeneralizedAttention(channels, num_heads=heads, attention_type=factors, **kwargs)
    with torch.no_grad():
        ref.gamma.fill_(0.9)
    ours = GeneralizedAttention(channels, num_heads=heads, attention_type=factors, **kwargs)
    ours.load_state_dict(ref.state_dict(), strict=True)
    return ref, ours


@pytest.mark.parametrize("factors", sorted(set(ALL_FACTORS) - MMCV_BROKEN))
@pytest.mark.parametrize("shape,q_stride,kv_stride", [
    ((2, 32, 10, 10), 1, 2), ((1, 32, 9, 14), 1, 2), ((2, 32, 7, 5), 1, 1), ((1, 32, 12, 9), 2, 3)])
def test_same_output_as_mmcv(factors, shape, q_stride, kv_stride):
    ref, ours = pair(factors, q_stride=q_stride, kv_stride=kv_stride, position_magnitude=2)
    x = torch.randn(shape)
    with torch.no_grad():
        torch.testing.assert_close(ours(x), ref(x), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("factors", sorted(MMCV_BROKEN))
def test_mmcv_is_wrong_where_we_are_right(factors):
    """Where mmcv runs (square maps) it disagrees with the float64 reference; we agree with it."""
    from reference import generalized_attention_2d

    ref, ours = pair(factors)
    x = torch.randn(1, 32, 8, 8)
    expected = generalized_attention_2d(ours, x)
    with torch.no_grad():
        torch.testing.assert_close(ours(x).double(), expected, rtol=1e-4, atol=1e-4)
        assert not torch.allclose(ref(x).double(), expected, rtol=1e-3, atol=1e-3)
        with pytest.raises(RuntimeError):
            ref(torch.randn(1, 32, 8, 12))  # mmdetection issue #8179
    assert ours(torch.randn(1, 32, 8, 12)).shape == (1, 32, 8, 12)


def test_state_dict_round_trip_and_mmcv_spatial_range_mask():
    """mmcv's spatial-range mask parameter is dropped on load; every other key matches exactly."""
    ref = MMCVGeneralizedAttention(256, num_heads=8, attention_type="1111", spatial_range=5)
    ours = GeneralizedAttention(256, num_heads=8, attention_type="1111", spatial_range=5)
    ours.load_state_dict(ref.state_dict(), strict=True)
    assert set(ref.state_dict()) - set(ours.state_dict()) == {"local_constraint_map"}
    reloaded = MMCVGeneralizedAttention(256, num_heads=8, attention_type="1111")
    reloaded.load_state_dict(ours.state_dict(), strict=True)


@pytest.mark.parametrize("factors", ALL_FACTORS)
def test_same_parameters_as_mmcv(factors):
    ref, ours = pair(factors)
    assert {k: v.shape for k, v in ref.named_parameters()} == {k: v.shape for k, v in ours.named_parameters()}
    assert ours._abbr_ == ref._abbr_
