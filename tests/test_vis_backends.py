"""attnbench's W&B backend records the config without mmengine's code artifact."""
from types import SimpleNamespace
from unittest import mock

from mmengine.config import Config

from attnbench.mm.registry import VISBACKENDS


def test_wandb_backend_records_the_config_and_no_code(tmp_path):
    backend = VISBACKENDS.build(dict(type="attnbench.WandbVisBackend", save_dir=str(tmp_path), init_kwargs={}))
    fake = SimpleNamespace(config=mock.Mock(), run=mock.Mock(), init=mock.Mock())
    with mock.patch.dict("sys.modules", wandb=fake):
        backend.add_config(Config(dict(model=dict(type="M"), seed=3)))
    fake.config.update.assert_called_once_with(dict(model=dict(type="M"), seed=3), allow_val_change=False)
    fake.run.log_code.assert_not_called()
    assert type(backend).__name__ == "WandbVisBackend"  # the name RunSummaryHook looks the backend up by
