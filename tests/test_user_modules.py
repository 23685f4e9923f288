"""A user's own mechanism from a file outside the package: the grammar, the plugin contract's refusals (one line
each, before any run), an edited file as a new run, and (slow) a smoke sweep on det and seg against 0010."""
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from attnbench.sweep.plan import build_plan
from attnbench.sweep.tasks import TASKS
from attnbench.variants import Variant

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "my_attention.py"

BROKEN = {
    "shape": ("class Broken(nn.Module):\n    def __init__(self, in_channels):\n        super().__init__()\n"
              "        self.conv = nn.Conv2d(in_channels, 2 * in_channels, 1)\n"
              "    def forward(self, x):\n        return self.conv(x)\n",
              "forward maps (2, 16, 12, 10) to (2, 32, 12, 10); a plugin keeps the shape"),
    "dtype": ("class Broken(nn.Module):\n    def __init__(self, in_channels):\n        super().__init__()\n"
              "        self.w = nn.Parameter(torch.ones(1))\n"
              "    def forward(self, x):\n        return (self.w * x).double()\n",
              "forward turns a torch.float32 input on cpu into torch.float64 on cpu"),
    "parameters": ("class Broken(nn.Module):\n    def __init__(self, in_channels):\n        super().__init__()\n"
                   "    def forward(self, x):\n        return x * 2\n",
                   "has no parameters to train"),
    "signature": ("class Broken(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
                  "    def forward(self, x):\n        return x\n",
                  "cls(in_channels=16, **{}) failed (TypeError"),
    "raises": ("raise RuntimeError('a bug in my file')\n", "its module does not import (RuntimeError: a bug in my file)"),
}


def write_module(folder: Path, name: str, body: str) -> None:
    (folder / f"{name}.py").write_text(f"import torch\nfrom torch import nn\n\n{body}")


def refusal(tmp_path, monkeypatch, name: str, body: str, task: str, **plan) -> str:
    """The one-line refusal of planning ``task`` with class ``Broken`` of module ``name`` (``body``), from the folder
    that holds the file, as a user would."""
    write_module(tmp_path, name, body)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    with pytest.raises(ValueError) as refused:
        build_plan([task], [], [f"{name}.Broken"], 1, "smoke", **plan)
    return str(refused.value)


def test_a_user_token_round_trips_with_its_own_parameters():
    variant = Variant.parse("my_attention.SpatialGate:reduction=8:stages=3-5")
    assert variant.name == "my_attention.SpatialGate:stages=3-5:reduction=8" and Variant.parse(variant.name) == variant
    (plugin,) = variant.backbone_overrides()["plugins"]
    assert plugin["cfg"] == dict(type="attnbench.UserModule", import_path="my_attention.SpatialGate", reduction=8)
    assert plugin["stages"] == (False, True, True, True)
    with pytest.raises(ValueError, match="is not NAME=VALUE once per name"):
        Variant.parse("my_attention.SpatialGate:reduction")


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_a_module_that_breaks_the_contract_is_refused_in_one_line_before_any_run(case, tmp_path, monkeypatch):
    body, rule = BROKEN[case]
    name = f"broken_{case}"
    message = refusal(tmp_path, monkeypatch, name, body, "det")
    assert message.startswith(f"variant '{name}.Broken' on det: {name}.Broken: ") or message.startswith(f"{name}.Broken")
    assert rule in message and "\n" not in message


def test_a_path_that_does_not_import_is_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match=r"^nowhere_module.Thing: no module 'nowhere_module' on the path"):
        build_plan(["det"], [], ["nowhere_module.Thing"], 1, "smoke")
    write_module(tmp_path, "has_no_class", "x = 1\n")
    with pytest.raises(ValueError, match="has_no_class has no torch.nn.Module subclass 'Thing'"):
        build_plan(["det"], [], ["has_no_class.Thing"], 1, "smoke")


def test_an_edited_file_is_a_new_run(tmp_path, monkeypatch):
    shutil.copy(EXAMPLE, tmp_path / "edited_attention.py")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    (before,) = build_plan(["seg"], [], ["edited_attention.SpatialGate"], 1, "smoke", baseline=False)
    again = build_plan(["seg"], [], ["edited_attention.SpatialGate"], 1, "smoke", baseline=False)
    assert again[0].run_id == before.run_id  # the same file: the same run
    (tmp_path / "edited_attention.py").write_text(EXAMPLE.read_text() + "\n# an edit\n")
    (after,) = build_plan(["seg"], [], ["edited_attention.SpatialGate"], 1, "smoke", baseline=False)
    assert after.run_id != before.run_id and after.variant == before.variant


@pytest.mark.slow
def test_a_users_module_sweeps_against_0010_on_det_and_seg_and_its_rows_are_read(tmp_path):
    """From the user's own folder, as the docs say: the rows are ok, with MACs counted, the source's hash and
    W&B off; compare.py and plot.py read the store."""
    shutil.copy(EXAMPLE, tmp_path / "my_attention.py")
    results = tmp_path / "results"
    sweep = subprocess.run([sys.executable, str(ROOT / "tools/sweep.py"), "--tasks", "det,seg", "--factors", "0010",
                            "--modules", "my_attention.SpatialGate", "--preset", "smoke", "--results", str(results),
                            "--no-wandb", "--no-snapshot", "--jobs", "2"], cwd=tmp_path, capture_output=True,
                           text=True, timeout=1500)
    assert sweep.returncode == 0, sweep.stdout[-3000:] + sweep.stderr[-3000:]
    rows = pd.read_csv(results / "results.csv")
    assert len(rows) == 6 and (rows["status"] == "ok").all()
    mine = rows[rows["variant"] == "my_attention.SpatialGate"]
    assert len(mine) == 2 and (mine["macs_source"] == "flop_counter").all()
    assert (mine["macs_modules_analytic"] > 0).all() and (mine["macs_modules"] == mine["macs_modules_analytic"]).all()
    import hashlib

    sha = hashlib.sha256((tmp_path / "my_attention.py").read_bytes()).hexdigest()[:16]
    assert (mine["module_source"] == f"my_attention.SpatialGate@{sha}").all()
    assert (rows[rows["variant"] == "0010"]["macs_source"] == "analytic").all()
    table = subprocess.run([sys.executable, str(ROOT / "tools/compare.py"), "--results", str(results)],
                           capture_output=True, text=True, cwd=ROOT)
    assert table.returncode == 0 and "my_attention.SpatialGate" in table.stdout, table.stderr
    plot = subprocess.run([sys.executable, str(ROOT / "tools/plot.py"), "--results", str(results)],
                          capture_output=True, text=True, cwd=ROOT)
    assert plot.returncode == 0 and (results / "tradeoff.png").exists(), plot.stderr


SLOT_BROKEN = {
    "no call": ("class Broken(nn.Module):\n    def __init__(self, embed_dim, num_heads, causal, dropout):\n"
                "        super().__init__()\n        self.w = nn.Parameter(torch.ones(1))\n",
                "defines neither mix(x, key_padding_mask, last) nor attend("),
    "last": ("class Broken(nn.Module):\n    def __init__(self, embed_dim, num_heads, causal, dropout):\n"
             "        super().__init__()\n        self.w = nn.Parameter(torch.ones(1))\n"
             "    def mix(self, x, key_padding_mask, last):\n        return self.w * x\n",
             "mix with last=2 gives (2, 6, 16), not (2, 2, 16)"),
    "parameters": ("class Broken(nn.Module):\n    def __init__(self, embed_dim, num_heads, causal, dropout):\n"
                   "        super().__init__()\n    def mix(self, x, key_padding_mask, last):\n"
                   "        return x[:, x.shape[1] - last:]\n",
                   "has no parameters to train"),
}


@pytest.mark.parametrize("case", sorted(SLOT_BROKEN))
def test_a_translation_slot_that_breaks_its_contract_is_refused_in_one_line(case, tmp_path, monkeypatch):
    body, rule = SLOT_BROKEN[case]
    name = f"broken_slot_{case.replace(' ', '_')}"
    message = refusal(tmp_path, monkeypatch, name, body, "nmt", slot="enc-self")
    assert message.startswith(f"{name}.Broken: ") and rule in message


def test_a_users_slot_fills_the_slots_whose_call_it_defines_and_is_counted(tmp_path, monkeypatch):
    """LocalMix defines mix only: it runs in the two self-attention slots, not in enc-dec; in the model its
    multiply-adds are counted by the FLOP counter and its source is named."""
    import torch

    from attnbench.attention.user_module import module_sources
    from attnbench.flops import count_model
    from attnbench.models.transformer_nmt import TransformerNMT

    shutil.copy(EXAMPLE, tmp_path / "slot_attention.py")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    runs = build_plan(["nmt"], [], ["slot_attention.LocalMix:window=5"], 1, "smoke", baseline=False)
    assert [run.slot for run in runs] == ["enc-self", "dec-self"]
    with pytest.raises(ValueError, match="cannot fill the enc-dec slot"):
        build_plan(["nmt"], [], ["slot_attention.LocalMix"], 1, "smoke", slot="enc-dec")
    mechanism = runs[0].cfg_options["model.encoder_self_attention"]
    assert mechanism["type"] == "user" and mechanism["window"] == 5 and len(mechanism["source_sha256"]) == 64
    model = TransformerNMT(vocab_size=12, embed_dim=16, num_heads=4, ffn_dim=32, num_encoder_layers=1,
                           num_decoder_layers=1, encoder_self_attention=mechanism)
    src, tgt = torch.randint(4, 12, (1, 7)), torch.randint(4, 12, (1, 8))
    counted = count_model(model, lambda: model(src, tgt, mode="tensor"))
    assert counted["macs_source"] == "flop_counter" and counted["macs_modules_analytic"] > 0
    assert module_sources(model) == f"slot_attention.LocalMix@{mechanism['source_sha256'][:16]}"


@pytest.mark.slow
def test_a_users_translation_slot_sweeps_against_the_baseline(tmp_path):
    shutil.copy(EXAMPLE, tmp_path / "my_attention.py")
    results = tmp_path / "results"
    sweep = subprocess.run([sys.executable, str(ROOT / "tools/sweep.py"), "--tasks", "nmt", "--slot", "enc-self",
                            "--modules", "my_attention.LocalMix:window=5", "--preset", "smoke", "--results",
                            str(results), "--no-wandb", "--no-snapshot", "--no-plot"], cwd=tmp_path,
                           capture_output=True, text=True, timeout=900)
    assert sweep.returncode == 0, sweep.stdout[-3000:] + sweep.stderr[-3000:]
    rows = pd.read_csv(results / "results.csv").set_index("variant")
    assert (rows["status"] == "ok").all() and len(rows) == 2
    mine = rows.loc["my_attention.LocalMix:window=5"]
    assert mine["slot"] == "enc-self" and mine["macs_source"] == "flop_counter" and mine["macs_modules"] > 0
    assert mine["module_source"].startswith("my_attention.LocalMix@")
