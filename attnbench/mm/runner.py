"""Config loading shared by ``tools/train.py``, ``tools/test.py`` and the sweep."""
from __future__ import annotations

import os.path as osp

from mmengine.config import Config


def load_config(path: str, work_dir: str | None = None, cfg_options: dict | None = None,
                launcher: str = "none") -> Config:
    """Read a config, apply ``--cfg-options`` overrides, and fix its launcher and work_dir
    (default ``work_dirs/<config name>``)."""
    if not osp.isfile(path):
        raise FileNotFoundError(f"config file not found: {path}")
    cfg = Config.fromfile(path)
    cfg.launcher = launcher
    if cfg_options:
        cfg.merge_from_dict(cfg_options)
    cfg.work_dir = work_dir or cfg.get("work_dir") or osp.join(
        "work_dirs", osp.splitext(osp.basename(path))[0])
    return cfg
