"""attnbench's W&B backend: mmengine's, without the code artifact it logs with every config.

mmengine's ``WandbVisBackend.add_config`` calls ``wandb.run.log_code()``, which adds every ``.py``
file under the working directory to an artifact; run from a checkout, that is the whole virtual
environment (torch, mmdet, sympy, ...), copied into W&B's staging folder
(``~/.local/share/wandb/artifacts/staging``) for every run and, offline, never removed. In this
project's checkout that is 18,147 files, 216 MB a run (``find . -name '*.py' | xargs du -ch``); a
day of sweeps filled the disk (4.2 million files, 58 GB). The results store records each run's
code version instead (``git_commit``, ``attnbench_version``, and the sweep's code snapshot).
"""
from mmengine.config import Config
from mmengine.visualization import WandbVisBackend as MMEngineWandbVisBackend
from mmengine.visualization.vis_backend import force_init_env

from .registry import VISBACKENDS


@VISBACKENDS.register_module()
class WandbVisBackend(MMEngineWandbVisBackend):
    """mmengine's ``WandbVisBackend`` whose :meth:`add_config` records the config and no code."""

    @force_init_env
    def add_config(self, config: Config, **kwargs) -> None:
        allow_val_change = self._init_kwargs.get("allow_val_change", False)
        self._wandb.config.update(config.to_dict(), allow_val_change=allow_val_change)
