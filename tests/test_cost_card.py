"""The cost card (attnbench.cost_card, tools/cost_card.py) and the counted MACs it reads (attnbench.flops)."""
import importlib.util
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from attnbench import cost_card
from attnbench.attention import AreaAttention2d, GeneralizedAttention
from attnbench.attention.factors import ALL_FACTORS
from attnbench.cost_card import (
    GIB, PRESETS, REFERENCE, Options, Shape, card_rows, fit_exponent, growth_table, is_placed, measure_mechanism,
    stage_shapes, summary_shape)
from attnbench.flops import count_forward, counted_macs
from attnbench.variants import MECHANISMS

ROOT = Path(__file__).resolve().parents[1]
COMMITTED = ROOT / "results" / "cost-card" / "mini-cpu"


@pytest.fixture(scope="module")
def tool():
    """tools/cost_card.py, imported from its file (tools/ is no package)."""
    spec = importlib.util.spec_from_file_location("cost_card_tool", ROOT / "tools" / "cost_card.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@torch.library.custom_op("attnbench_test::dense_mm", mutates_args=())
def dense_mm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """A matrix product torch's counter has no formula for."""
    return a @ b


@dense_mm.register_fake
def _(a, b):
    return a.new_empty(a.shape[0], b.shape[1])


class Products(nn.Module):
    """A linear layer, a batched matmul and a grouped strided conv, whose multiply-adds are counted by hand."""

    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(6, 4)
        self.conv = nn.Conv2d(4, 6, 3, stride=2, groups=2)

    def forward(self, x, a, b, image):
        return self.linear(x).sum() + (a @ b).sum() + self.conv(image).sum()


def test_counted_macs_equal_a_hand_count_for_products_and_convolutions():
    module = Products().double()
    x, a, b = torch.randn(3, 5, 6, dtype=torch.float64), torch.randn(2, 3, 4, dtype=torch.float64), \
        torch.randn(2, 4, 5, dtype=torch.float64)
    image = torch.randn(1, 4, 9, 8, dtype=torch.float64)
    out_h, out_w = (9 - 3) // 2 + 1, (8 - 3) // 2 + 1
    by_hand = 3 * 5 * 6 * 4 + 2 * 3 * 4 * 5 + 1 * 6 * out_h * out_w * (4 // 2) * 3 * 3
    assert counted_macs(module, x, a, b, image) == by_hand
    assert counted_macs(nn.Conv2d(3, 5, 3, padding=1, bias=False).double(),
                        torch.randn(2, 3, 7, 9, dtype=torch.float64)) == 2 * 5 * 7 * 9 * 3 * 9


@pytest.mark.parametrize("factors", ["1111", "0010"])
def test_counted_macs_equal_generalized_attentions_analytic_count(factors):
    module = GeneralizedAttention(32, num_heads=8, attention_type=factors, kv_stride=2)
    x = torch.randn(2, 32, 8, 10, requires_grad=True)  # an input that needs gradients, as in a network
    count = count_forward(module, x)
    assert count.macs == module.macs(x) > 0
    assert count.torch_misses == count.uncounted == ()


def test_count_names_the_operators_torchs_counter_misses():
    q = torch.randn(2, 4, 16, 8)
    sdpa = count_forward(F.scaled_dot_product_attention, q, q, q)  # the CPU flash kernel: attnbench's formula
    assert sdpa.torch_misses == ("aten._scaled_dot_product_flash_attention_for_cpu",) and sdpa.uncounted == ()
    assert sdpa.macs == 2 * 2 * 4 * 16 * 16 * 8
    custom = count_forward(lambda a, b: dense_mm(a, b) + a @ b, torch.randn(3, 4), torch.randn(4, 3))
    assert custom.uncounted == custom.torch_misses == ("attnbench_test.dense_mm",)
    assert custom.macs == 3 * 4 * 3  # the plain product only


def test_counted_macs_of_a_module_whose_views_of_the_input_need_gradients():
    """Under no_grad a view of an input that needs gradients has no grad_fn; FlopCounterMode's module tracker
    fails on it unless the inputs are detached first (area attention's submodules receive such views)."""
    module = AreaAttention2d(16, num_heads=4, max_area_width=2, max_area_height=2, kv_stride=2)
    x = torch.randn(2, 16, 6, 6, requires_grad=True)
    assert counted_macs(module, x) == module.macs(x)


def test_exponent_fit_recovers_a_known_exponent():
    tokens = np.array([64, 144, 256, 576, 1024])
    assert fit_exponent(tokens, 3e-5 * tokens ** 1.7) == pytest.approx(1.7, abs=1e-9)
    noise = np.array([1.03, 0.97, 1.02, 0.98, 1.01])
    assert fit_exponent(tokens, 2e-4 * tokens ** 2 * noise) == pytest.approx(2.0, abs=0.03)


def test_growth_needs_four_measured_sizes():
    tokens = [64, 256, 1024, 4096]
    cells = pd.DataFrame(dict(mechanism="x", preset="mini", part="scaling", tokens=tokens,
                              status=["ok", "ok", "ok", "over memory cap: est."], seconds=[1e-3 * t for t in tokens],
                              peak_bytes=[8.0 * t for t in tokens]))
    row = growth_table(cells).iloc[0]
    assert row["sizes_measured"] == 3 and math.isnan(row["time_exponent"]) and math.isnan(row["memory_exponent"])
    cells["status"] = "ok"
    row = growth_table(cells).iloc[0]
    assert row["time_exponent"] == pytest.approx(1.0) and row["memory_exponent"] == pytest.approx(1.0)


def test_the_card_has_a_row_for_every_mechanism_of_the_catalogue():
    assert card_rows() == (REFERENCE, *ALL_FACTORS, *MECHANISMS)
    committed = pd.read_csv(COMMITTED / "card.csv")
    missing = [t for t in card_rows() if t not in set(committed["mechanism"])]
    assert not missing, f"no row in {COMMITTED.relative_to(ROOT)}/card.csv for {missing}: run the card again " \
                        "(docs/mechanisms.md#cost-card)"


def test_stage_shapes_follow_the_resnets_of_the_presets():
    shapes = {(s.preset, s.label): (s.n, s.channels, s.height, s.width) for p in PRESETS for s in stage_shapes(p)}
    assert shapes["full", "det conv3"] == (2, 128, 100, 168) and shapes["full", "det conv5"] == (2, 512, 25, 42)
    assert shapes["full", "seg conv4"] == (2, 256, 64, 128)
    assert shapes["mini", "det conv3"] == (8, 16, 16, 16) and shapes["mini", "det conv5"] == (8, 64, 4, 4)
    assert shapes["mini", "seg conv5"] == (8, 64, 16, 16)
    assert summary_shape("mini").tokens == 256 and summary_shape("full").label == "det conv4"


def test_the_presets_widths_and_batches_are_their_configs():
    from mmengine.config import Config

    for preset, path in (("mini", "configs/detection/faster-rcnn_r50w8_fpn_mini-shapes.py"),
                         ("mini", "configs/segmentation/deeplabv3_r50w8-d8_mini-shapes-128x128.py"),
                         ("full", "configs/detection/faster-rcnn_r50_fpn_1x_coco.py")):
        cfg = Config.fromfile(ROOT / path)
        assert cfg.model.backbone.get("base_channels", 64) == PRESETS[preset].width, path
        assert cfg.train_dataloader.batch_size == PRESETS[preset].batch, path


def test_placement_follows_the_presets_stages():
    full, mini = ({s.label: s for s in stage_shapes(p)} for p in ("full", "mini"))
    assert not is_placed("1111", full["det conv3"]) and is_placed("1111", full["det conv4"])
    assert is_placed("1111", mini["det conv3"]) and is_placed("deformable", full["det conv3"])
    assert [is_placed("ocr", s) for s in stage_shapes("mini")] == [False] * 5 + [True]
    assert not is_placed("lightweight", mini["seg conv4"])


def test_the_memory_guard_marks_a_cell_instead_of_allocating(monkeypatch):
    def must_not_run(*args):
        raise AssertionError("the guarded cell was measured")

    monkeypatch.setattr(cost_card, "measure_cell", must_not_run)
    huge = Shape("full", "scaling", "256x256", 2, 64, 256, 256, 19)  # two 65,536 x 65,536 float32 maps: 32 GiB
    (row,) = measure_mechanism("nonlocal", [huge], Options(max_gib=8))
    assert row["status"].startswith("over memory cap: est.") and row["estimated_bytes"] > 8 * GIB
    assert "seconds" not in row and "peak_bytes" not in row
    assert row["macs_counted"] == row["macs_analytic"] > 0


def test_the_time_cap_marks_cells_by_their_first_pass_and_by_extrapolation():
    small, large = (Shape("mini", "scaling", f"{s}x{s}", 2, 8, s, s, 3) for s in (4, 8))
    rows = measure_mechanism("se", [small, large], Options(repeats=1, max_seconds=1e-9))
    assert rows[0]["status"].startswith("over time cap: one pass took") and rows[0]["seconds"] > 0
    assert rows[1]["status"].startswith("over time cap: est.") and "seconds" not in rows[1]


def test_a_translation_only_token_has_a_marked_row():
    (row,) = measure_mechanism("lightweight", [summary_shape("mini")], Options())
    assert row["status"].startswith("n/a: translation only")


def test_the_tool_writes_csv_markdown_and_plots_for_tiny_sizes(tool, tmp_path, capsys):
    threads = torch.get_num_threads()
    assert tool.main(["--mechanisms", "conv3x3,0010,se,ocr,lightweight", "--shapes", "mini", "--sizes", "4,5,6,8",
                      "--repeats", "1", "--out", str(tmp_path)]) == 0
    assert torch.get_num_threads() == threads  # the card's one thread is not left behind
    assert "[5/5" in capsys.readouterr().err
    cells = pd.read_csv(tmp_path / "card.csv")
    assert list(dict.fromkeys(cells["mechanism"])) == ["conv3x3", "0010", "se", "ocr", "lightweight"]
    assert len(cells) == 5 * (6 + 4)
    measured = cells[cells["mechanism"] != "lightweight"]
    assert (measured["status"] == "ok").all() and (measured["seconds"] > 0).all() and (measured["peak_bytes"] > 0).all()
    assert (measured["macs_counted"] == measured["macs_analytic"]).all()
    growth = pd.read_csv(tmp_path / "growth.csv").set_index("mechanism")
    assert growth.loc["se", "sizes_measured"] == 4 and np.isfinite(growth.loc["se", "time_exponent"])
    markdown = (tmp_path / "card.md").read_text()
    assert "<!-- cost card summary: mini -->" in markdown and "| `lightweight` |" in markdown
    assert (tmp_path / "scaling.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (tmp_path / "scaling.svg").read_text().lstrip().startswith("<?xml")


def test_a_users_module_gets_its_card_with_counted_macs(tool, tmp_path, monkeypatch, capsys):
    """A user's module by its import path, from the current folder: measured beside the catalogue's rows, its
    MACs counted (it has no macs()); one that breaks the plugin contract is refused before any cell."""
    (tmp_path / "card_user_module.py").write_text((ROOT / "examples" / "my_attention.py").read_text())
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.path", list(__import__("sys").path))
    out = tmp_path / "card"
    assert tool.main(["--mechanisms", "card_user_module.SpatialGate", "--shapes", "mini", "--sizes", "4,5,6,8",
                      "--repeats", "1", "--out", str(out)]) == 0
    cells = pd.read_csv(out / "card.csv")
    assert (cells["status"] == "ok").all() and (cells["family"] == "user").all()
    assert cells["macs_analytic"].isna().all() and (cells["macs_counted"] > 0).all()
    (tmp_path / "card_broken_module.py").write_text("from torch import nn\nclass Broken(nn.Module):\n"
                                                    "    def __init__(self, c):\n        super().__init__()\n"
                                                    "    def forward(self, x):\n        return x\n")
    with pytest.raises(SystemExit) as refused:
        tool.main(["--mechanisms", "card_broken_module.Broken", "--shapes", "mini", "--sizes", "4,5,6,8",
                   "--out", str(out)])
    assert refused.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1].endswith("card_broken_module.Broken: has no parameters to train "
                                                            "(a mechanism the benchmark trains learns)")


def test_the_tool_refuses_too_few_sizes_and_unknown_rows(tool, capsys):
    for argv in (["--sizes", "4,8,16"], ["--mechanisms", "0000"]):
        with pytest.raises(SystemExit) as exit_:
            tool.main(argv)
        assert exit_.value.code == 2
    assert "at least four" in capsys.readouterr().err


def summary(markdown: str, preset: str) -> str:
    match = re.search(rf"<!-- cost card summary: {preset} -->\n(.*?)\n<!-- end cost card summary -->", markdown, re.S)
    assert match, f"no {preset} summary"
    return match[1]


def test_the_docs_embed_the_committed_mini_card():
    committed = summary((COMMITTED / "card.md").read_text(), "mini")
    assert summary((ROOT / "docs" / "mechanisms.md").read_text(), "mini") == committed
    cells = pd.read_csv(COMMITTED / "card.csv")
    assert set(cells["preset"]) == {"mini"}
    assert (cells["memory_measure"].dropna() == "cpu allocator (torch.profiler)").all()
    assert (COMMITTED / "scaling.png").exists() and (COMMITTED / "scaling.svg").exists()


def test_what_the_docs_say_of_the_committed_mini_card():
    """docs/mechanisms.md, "Cost card": the counted MACs equal the analytic ones in every cell; torch's counter
    misses the CPU flash attention kernel in 1000, 1010 and area (attnbench.flops counts it); the square maps span
    64 to 1,024 tokens (full: 256 to 16,384); nonlocal and da grow fastest in memory; torchvision's
    deform_conv2d backward has no formula anywhere."""
    from torch.utils.flop_counter import FlopCounterMode

    from attnbench.flops import EXTRA_FLOP_FORMULAS

    cells = pd.read_csv(COMMITTED / "card.csv", keep_default_na=False, na_values=[""])
    counted = cells.dropna(subset=["macs_analytic", "macs_counted"])
    assert len(counted) == (cells["status"] == "ok").sum()
    assert (counted["macs_analytic"] == counted["macs_counted"]).all()
    flash = "aten._scaled_dot_product_flash_attention_for_cpu (attnbench formula)"
    missed = cells.dropna(subset=["counter_misses"])
    assert set(missed["counter_misses"]) == {flash}
    assert list(dict.fromkeys(missed["mechanism"])) == ["1000", "1010", "area"]
    growth = pd.read_csv(COMMITTED / "growth.csv")
    assert set(growth["tokens"].dropna()) == {"64-1024"}
    full = cost_card.scaling_shapes("full")
    assert (full[0].tokens, full[-1].tokens) == (256, 16384)
    assert set(growth.nlargest(2, "memory_exponent")["mechanism"]) == {"nonlocal", "da"}
    backward = torch.ops.torchvision._deform_conv2d_backward
    assert backward not in FlopCounterMode(display=False).flop_registry and backward not in EXTRA_FLOP_FORMULAS
