"""tools/toy_position_rule.py: the flag-side rule on a toy map, learnt by one attention block alone."""
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
import toy_position_rule as toy  # noqa: E402  tools/toy_position_rule.py


def test_samples_label_each_column_by_the_flag_side_its_colour_names():
    x, target, mask = toy.samples(64, torch.Generator().manual_seed(0))
    for i in range(64):
        flag = (x[i, 1] == 1).nonzero()
        left, right = int(flag[:, 1].min()), int(flag[:, 1].max())
        yellow = bool(x[i, 0, flag[0, 0], flag[0, 1]] > 0)
        for column in range(toy.SIZE):
            if left <= column <= right:
                assert not mask[i, 0, :, column].any()  # a query above or below the flag has no side
            else:
                flag_on_left = column > right
                assert bool(target[i, 0, 0, column]) == (flag_on_left == yellow)


def test_background_adds_one_constant_to_channel_2_only():
    plain, target, mask = toy.samples(8, torch.Generator().manual_seed(1))
    shifted, target_shifted, mask_shifted = toy.samples(8, torch.Generator().manual_seed(1), background=0.5)
    torch.testing.assert_close(shifted[:, 2] - plain[:, 2], torch.full_like(plain[:, 2], 0.5))
    assert torch.equal(shifted[:, [0, 1, 3]], plain[:, [0, 1, 3]])
    assert torch.equal(target, target_shifted) and torch.equal(mask, mask_shifted)


@pytest.mark.slow
def test_e4_alone_learns_the_side_rule_and_e3_alone_cannot():
    """E4 weighs keys by their offset only: two heads leaning left and right carry the flag's colour from each
    side. E3 gives every query the same context, so the read-out cannot tell the sides apart."""
    assert toy.train("0001", lr=1.0, steps=400) >= 0.8
    assert toy.train("0010", lr=0.2, steps=100) <= 0.65
