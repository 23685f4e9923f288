"""OpenMMLab adapters: registers attnbench's mechanisms, models, datasets and metrics.

It imports mmcv, mmdet and mmseg at module level; elsewhere only the translation model and its data
(attnbench.models.transformer_nmt, attnbench.data.translation, token_store) import mmengine, and the
vocabulary (attnbench.variants) and the reports (attnbench.analysis.report and the modules it names, claims,
stats) import neither OpenMMLab nor torch. Use it from any mmdet/mmseg/mmengine config with
``custom_imports = dict(imports=['attnbench.mm'], allow_failed_imports=False)``.
"""
from . import attention_mass  # noqa: F401
from . import datasets  # noqa: F401
from . import heads  # noqa: F401
from . import hooks  # noqa: F401
from . import metrics  # noqa: F401
from . import nmt  # noqa: F401
from . import plugins  # noqa: F401
from . import vis_backends  # noqa: F401
from .registry import DATASETS, HOOKS, METRICS, MODELS

__all__ = ["DATASETS", "HOOKS", "METRICS", "MODELS"]
