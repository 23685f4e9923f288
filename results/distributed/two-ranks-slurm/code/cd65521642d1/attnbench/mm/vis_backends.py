"""attnbench's W&B backend: mmengine's, without the code artifact it logs with every config, and
without importing W&B Launch when nothing was staged for it.

mmengine's ``WandbVisBackend.add_config`` calls ``wandb.run.log_code()``, which adds every ``.py``
file under the working directory to an artifact; run from a checkout, that is the whole virtual
environment (torch, mmdet, sympy, ...), copied into W&B's staging folder
(``~/.local/share/wandb/artifacts/staging``) for every run and, offline, never removed. In this
project's checkout that is 18,147 files, 216 MB a run (``find . -name '*.py' | xargs du -ch``); a
day of sweeps filled the disk (4.2 million files, 58 GB). The results store records each run's
code version instead (``git_commit``, ``attnbench_version``, and the sweep's code snapshot).
"""
import sys

from mmengine.config import Config
from mmengine.visualization import WandbVisBackend as MMEngineWandbVisBackend
from mmengine.visualization.vis_backend import force_init_env

from .registry import VISBACKENDS


@VISBACKENDS.register_module()
class WandbVisBackend(MMEngineWandbVisBackend):
    """mmengine's ``WandbVisBackend`` whose :meth:`add_config` records the config and no code, and
    whose ``wandb.init`` leaves W&B Launch unimported (:func:`_skip_unstaged_launch_inputs`)."""

    def _init_env(self):
        _skip_unstaged_launch_inputs()
        super()._init_env()

    @force_init_env
    def add_config(self, config: Config, **kwargs) -> None:
        allow_val_change = self._init_kwargs.get("allow_val_change", False)
        self._wandb.config.update(config.to_dict(), allow_val_change=allow_val_change)


_LAUNCH_INPUTS = "wandb.sdk.launch.inputs.internal"


def _skip_unstaged_launch_inputs() -> None:
    """Let ``wandb.init`` skip applying W&B Launch job inputs where none can have been staged.

    Every ``wandb.init`` (0.31) imports :data:`_LAUNCH_INPUTS` to apply the inputs staged in this
    process for a Launch job; that import pulls in W&B's Launch and public API (pydantic models
    whose field docstrings are read from source): 1.3-1.8 s of a run's set-up on a busy 2-core
    machine, most of wandb.init. Inputs are staged through that module only, so until it is
    imported there is nothing to apply; once it is, W&B's own method runs.
    """
    from wandb.sdk.wandb_run import Run

    apply = Run._detect_and_apply_job_inputs
    if getattr(apply, "skips_unstaged", False):
        return

    def detect_and_apply_job_inputs(run) -> None:
        if _LAUNCH_INPUTS in sys.modules:
            apply(run)

    detect_and_apply_job_inputs.skips_unstaged = True
    Run._detect_and_apply_job_inputs = detect_and_apply_job_inputs
