"""The variant grammar: one parser, round trips, clear errors, parameters reaching the modules."""
import re
from pathlib import Path

import pytest

from attnbench.attention.factors import ALL_FACTORS
from attnbench.variants import MECHANISMS, PARAMETERS, Variant, vision_rows

ROOT = Path(__file__).resolve().parent.parent

WITH_PARAMETERS = [
    "0100:range=7", "dynamic:kernel=7", "1111:heads=4:kv_stride=1:stages=3-5", "0010+deformable:groups=4",
    "1111:stages=4", "se:stages=2-5+0010:range=3", "lightweight:kernel=15", "area:heads=4",
    "1000:score=additive", "1111:score=bilinear:hard=top4", "1000:hard=top1", "1111:gate=1", "0010:heads=4:gate=0.5",
    "1111:gate=1:lr=10", "se:lr=3+0010:lr=10"]


@pytest.mark.parametrize("spec", [*vision_rows("seg"), *WITH_PARAMETERS])
def test_round_trip(spec):
    variant = Variant.parse(spec)
    assert Variant.parse(variant.name) == variant
    assert Variant.parse(variant.name).name == variant.name


@pytest.mark.parametrize("spec,name", [("1111:lr=1000000", "1111:lr=1e06"), ("1111:lr=1e-05", "1111:lr=1e-05"),
                                       ("1111:gate=0.1234567", "1111:gate=0.1234567"), ("1111:gate=1.0", "1111:gate=1")])
def test_a_number_is_written_to_read_back_exactly(spec, name):
    """``format(v, 'g')`` alone writes ``1e+06`` (``+`` joins tokens) and rounds to six digits."""
    variant = Variant.parse(spec)
    assert variant.name == name and Variant.parse(name) == variant


def test_canonical_order_of_tokens_and_parameters():
    assert Variant.parse("deformable+0010").name == "0010+deformable"
    assert Variant.parse("1111:stages=3-5:heads=4").name == "1111:heads=4:stages=3-5"
    assert Variant.parse("1111:stages=4-4").name == "1111:stages=4"
    assert Variant.parse("0100:range=7").slug == "attn0100-range7"
    assert Variant.parse("0100:range=7").parameter_text == "range=7"
    assert Variant.parse("0100:range=7") != Variant.parse("0100")


@pytest.mark.parametrize("spec,match", [
    ("0100:rang=7", "unknown parameter 'rang'"), ("0100:range=-1", "integer >= 0"),
    ("0100:range=7.5", "integer"), ("dynamic:kernel=4", "odd integer"), ("se:kernel=3", "se takes"),
    ("0100:range=7:range=3", "twice"), ("1111:stages=5-3", "stages"), ("1111:stages=1-3", "stages"),
    ("ocr+0010", "run alone"), ("0100:range", "integer"), ("0120:range=3", "four characters of 0/1"), ("spatial:range=3", "unknown token"),
    ("ocr:stages=3", "ocr takes no parameters"), ("se+baseline", "'baseline' .* is a row alone"), ("0010+0100", "two factor strings"),
    ("1000:hard=top0", "topK"), ("1000:hard=1", "topK"), ("1000:score=cosine", "one of"),
    ("dynamic:score=dot", "dynamic takes"), ("0010:gate=x", "a number"), ("0010:gate=1.2.3", "a number"),
    ("se:gate=1", "se takes"), ("0010:lr=fast", "a number"), ("deformable:lr=10", "deformable takes")])
def test_errors(spec, match):
    with pytest.raises(ValueError, match=match):
        Variant.parse(spec)


def test_parameters_reach_the_backbone():
    (attention,) = Variant.parse("1111:heads=4:kv_stride=1:range=3:stages=3-5").backbone_overrides()["plugins"]
    assert attention["cfg"] == dict(type="attnbench.GeneralizedAttention", spatial_range=3, num_heads=4,
                                    attention_type="1111", kv_stride=1)
    assert attention["stages"] == (False, True, True, True)
    overrides = Variant.parse("0010+deformable:groups=4:stages=5").backbone_overrides()
    assert overrides["dcn"]["deform_groups"] == 4 and overrides["stage_with_dcn"] == (False, False, False, True)
    assert overrides["plugins"][0]["stages"] == (False, False, True, True)  # the default: conv4-conv5
    (gated,) = Variant.parse("0010:gate=0.5").backbone_overrides()["plugins"]
    assert gated["cfg"]["gamma_init"] == 0.5 and Variant.parse("0010:gate=0.50").name == "0010:gate=0.5"
    (dynamic,) = Variant.parse("dynamic:kernel=5").backbone_overrides()["plugins"]
    assert dynamic["cfg"]["kernel_size"] == 5


def test_parameters_reach_the_translation_slot():
    assert Variant.parse("0100:range=7").translation_config() == dict(
        type="generalized", attention_type="0100", window=7)
    assert Variant.parse("dynamic:kernel=15").translation_config() == dict(type="dynamic", kernel_size=15)
    assert Variant.parse("1000:score=additive:hard=top2").translation_config() == dict(
        type="generalized", attention_type="1000", score="additive", hard=2)
    with pytest.raises(ValueError, match="vision tasks only"):
        Variant.parse("1111:heads=4").translation_config()
    (plugin,) = Variant.parse("1000:score=additive:hard=top2").backbone_overrides()["plugins"]
    assert plugin["cfg"] | dict(score="additive", hard=2) == plugin["cfg"]
    with pytest.raises(ValueError, match="no combinations"):
        Variant.parse("0010+deformable").translation_config()
    with pytest.raises(ValueError, match="translation mechanism"):
        Variant.parse("lightweight").backbone_overrides()


def test_every_parameter_is_documented():
    text = (ROOT / "docs" / "sweep.md").read_text()
    assert all(f"`{name}`" in text for name in PARAMETERS)


def test_variant_strings_are_split_in_one_place():
    """attnbench/variants.py parses variant strings; nothing else splits them on '+' or ':'."""
    splitting = re.compile(r"""\.(?:r?split|partition)\(\s*["'][+:]["']""")
    offenders = [str(path.relative_to(ROOT)) for folder in ("attnbench", "tools") for path in (ROOT / folder).rglob("*.py")
                 if path.name != "variants.py" and splitting.search(path.read_text())]
    assert offenders == []


def test_window_sizes_and_the_figure4_plot(tmp_path):
    import pandas as pd

    from attnbench.analysis.plots import plot_windows, window_size

    assert window_size("dynamic:kernel=7", "enc-self") == 7
    assert window_size("0100:range=3", "enc-self") == 7 and window_size("0100:range=6", "dec-self") == 7
    assert window_size("0100:range=2", None) == 5  # images: keys within 2 pixels on each axis
    assert window_size("0100", "enc-self") is None and window_size("0100:range=1+se", None) is None
    variants = ["baseline", "0100", "dynamic:kernel=3", "0100:range=1", "dynamic:kernel=7", "0100:range=3"]
    rows = [dict(task="nmt", preset="mini", slot=None if v == "baseline" else "enc-self", variant=v, seed=seed,
                 metric="translation/BLEU", value=float(i + seed), status="ok", macs_model=1.0 + i,
                 macs_modules=float(i), params_model=1.0) for i, v in enumerate(variants) for seed in (0, 1)]
    paths = plot_windows(pd.DataFrame(rows), tmp_path / "windows")
    assert all(p.exists() and p.stat().st_size > 1000 for p in paths)
    with pytest.raises(ValueError, match="no rows with a window"):
        plot_windows(pd.DataFrame(rows[:4]), tmp_path / "none")
    crowded = [row | dict(variant=f"{factors}:range=1") for factors in ALL_FACTORS[:9] for row in rows[-2:]]
    with pytest.raises(ValueError, match="10 windowed mechanisms on nmt, more than the 8 colours"):  # and dynamic
        plot_windows(pd.DataFrame(rows + crowded), tmp_path / "crowded")


def test_generated_configs_spell_the_parameters():
    from mmengine.config import Config

    from attnbench.config_files import generated_vision_configs

    configs = generated_vision_configs(("0100:range=3",))
    assert sorted(p.name for p in configs) == [
        "deeplabv3_r50-d8-attn0100-range3_4xb2-80k_cityscapes-512x1024.py",
        "deeplabv3_r50w8-d8-attn0100-range3_mini-shapes-128x128.py",
        "faster-rcnn_r50-attn0100-range3_fpn_1x_coco.py", "faster-rcnn_r50w8-attn0100-range3_fpn_mini-shapes.py"]
    text = next(t for p, t in configs.items() if p.name.startswith("faster-rcnn_r50w8"))
    cfg = Config.fromstring(text.replace("./", str(ROOT / "configs" / "detection") + "/"), ".py")
    assert cfg.model.backbone.plugins[0]["cfg"]["spatial_range"] == 3


def test_learning_rate_multiplier_reaches_the_optimizer_not_the_module():
    variant = Variant.parse("1111:gate=1:lr=10")
    (attention,) = variant.backbone_overrides()["plugins"]
    assert "lr" not in attention["cfg"] and None not in attention["cfg"]
    assert variant.optimizer_overrides() == dict(paramwise_cfg=dict(custom_keys=dict(
        gen_attention_block=dict(lr_mult=10.0))))
    assert Variant.parse("1111:gate=1").optimizer_overrides() == {}


def test_fields_split_the_row_into_terms_tokens_and_parameters():
    assert Variant.parse("baseline").fields == dict(E1=False, E2=False, E3=False, E4=False)
    assert Variant.parse("0110:range=7:gate=1+deformable:groups=4").fields == dict(
        E1=False, E2=True, E3=True, E4=False, deformable=True, range=7, gate=1.0, groups=4)
    assert Variant.parse("0010:gate=1+dynamic:gate=0.5").fields == dict(
        E1=False, E2=False, E3=True, E4=False, dynamic=True, gate_0010=1.0, gate_dynamic=0.5)


def test_gate_start_is_the_most_closed_gate_of_the_tokens_that_take_one():
    assert Variant.parse("1111:gate=1").gate_start == 1.0
    assert Variant.parse("nonlocal").gate_start == 0.0  # out_gain's zero start, the module's default
    assert Variant.parse("0010:gate=1+dynamic:gate=0.5").gate_start == 0.5
    assert Variant.parse("0010:gate=1+deformable").gate_start == 1.0  # deformable takes no gate
    assert Variant.parse("se").gate_start is None and Variant.parse("baseline").gate_start is None


def test_every_token_prints_in_a_run_config():
    """The fields travel in each run's config (``attnbench_run``), which mmengine prints as ``dict(name=value)``
    into the log: a token named after a Python keyword (``nonlocal``) must not end the run there."""
    from mmengine.config import Config

    for token in MECHANISMS:
        fields = Variant.parse(token).with_defaults(dict(gate=1.0, lr=10.0)).fields
        assert Config(dict(attnbench_run=fields)).pretty_text, token
    assert Variant.parse("nonlocal").fields == dict(E1=False, E2=False, E3=False, E4=False, nonlocal_=True)


def test_defaults_fill_only_what_a_token_takes_and_leaves_unset():
    defaults = dict(gate=1.0, lr=10.0)
    assert Variant.parse("1111").with_defaults(defaults) == Variant.parse("1111:gate=1:lr=10")
    assert Variant.parse("1111:gate=0").with_defaults(defaults) == Variant.parse("1111:gate=0:lr=10")
    assert Variant.parse("0010+deformable").with_defaults(defaults) == Variant.parse("0010:gate=1:lr=10+deformable")
    assert Variant.parse("se").with_defaults(defaults) == Variant.parse("se:lr=10")  # no gate: se has no zero start
    assert Variant.parse("deformable").with_defaults(defaults) == Variant.parse("deformable")  # takes neither
    assert Variant.parse("baseline").with_defaults(defaults) == Variant.parse("baseline")
