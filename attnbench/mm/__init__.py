"""OpenMMLab adapters: registers attnbench's mechanisms, models, datasets and metrics.

The only sub-package that imports OpenMMLab at module level. Use it from any mmdet/mmseg/mmengine
config with ``custom_imports = dict(imports=['attnbench.mm'], allow_failed_imports=False)``.
"""
from . import datasets  # noqa: F401
from . import hooks  # noqa: F401
from . import nmt  # noqa: F401
from . import plugins  # noqa: F401
from .registry import DATASETS, HOOKS, METRICS, MODELS

__all__ = ["DATASETS", "HOOKS", "METRICS", "MODELS"]
