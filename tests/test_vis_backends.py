"""attnbench's W&B backend records the config without mmengine's code artifact, and W&B Launch is
imported only where a job can have staged inputs for it."""
import json
import subprocess
import sys
import textwrap
from types import ModuleType, SimpleNamespace
from unittest import mock

import wandb.sdk.wandb_run  # noqa: F401  the backend patches its Run even where a test fakes the wandb module
from mmengine.config import Config
from wandb_log import config_and_summary, records

from attnbench.mm.registry import VISBACKENDS
from attnbench.mm.vis_backends import _LAUNCH_INPUTS, _skip_unstaged_launch_inputs


def test_wandb_backend_records_the_config_and_no_code(tmp_path):
    backend = VISBACKENDS.build(dict(type="attnbench.WandbVisBackend", save_dir=str(tmp_path), init_kwargs={}))
    fake = SimpleNamespace(config=mock.Mock(), run=mock.Mock(), init=mock.Mock())
    with mock.patch.dict("sys.modules", wandb=fake):
        backend.add_config(Config(dict(model=dict(type="M"), seed=3)))
    fake.config.update.assert_called_once_with(dict(model=dict(type="M"), seed=3), allow_val_change=False)
    fake.run.log_code.assert_not_called()
    assert type(backend).__name__ == "WandbVisBackend"  # the name RunSummaryHook looks the backend up by


def test_wandb_init_applies_launch_inputs_only_where_they_can_have_been_staged(monkeypatch):
    from wandb.sdk.wandb_run import Run

    applied = []
    monkeypatch.setattr(Run, "_detect_and_apply_job_inputs", lambda run: applied.append(run))  # W&B's, restored after
    monkeypatch.delitem(sys.modules, _LAUNCH_INPUTS, raising=False)
    _skip_unstaged_launch_inputs()
    _skip_unstaged_launch_inputs()  # installed once
    Run._detect_and_apply_job_inputs("run")
    assert applied == []  # nothing staged: W&B Launch stays unimported
    monkeypatch.setitem(sys.modules, _LAUNCH_INPUTS, ModuleType(_LAUNCH_INPUTS))  # as once a job stages inputs
    Run._detect_and_apply_job_inputs("run")
    assert applied == ["run"]


def test_wandb_offline_run_files_hold_config_summary_and_curves(tmp_path):
    script = textwrap.dedent(f"""
        import sys
        from mmengine.config import Config
        from attnbench.mm.registry import VISBACKENDS
        backend = VISBACKENDS.build(dict(type="attnbench.WandbVisBackend", save_dir={str(tmp_path)!r},
                                         init_kwargs=dict(project="attnbench-test", mode="offline")))
        backend.add_config(Config(dict(model=dict(type="M"), seed=3)))
        backend.add_scalars(dict(loss=0.5), step=1)
        backend.experiment.run.summary.update(dict(macs_model=7))
        backend.close()
        print("launch imported:", {_LAUNCH_INPUTS!r} in sys.modules)
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "launch imported: False" in proc.stdout
    (run_file,) = tmp_path.glob("**/offline-run-*/run-*.wandb")
    config, summary = config_and_summary(run_file)
    assert json.loads(config["model"]) == {"type": "M"} and json.loads(config["seed"]) == 3
    assert json.loads(summary["macs_model"]) == 7
    curves = [{item.key or ".".join(item.nested_key): item.value_json for item in r.history.item} for r in records(run_file)
              if r.WhichOneof("record_type") == "history"]
    assert [json.loads(step["loss"]) for step in curves] == [0.5]
