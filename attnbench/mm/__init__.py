"""OpenMMLab adapters: registers attnbench's mechanisms, models, datasets and metrics.

It imports mmcv, mmdet and mmseg at module level; elsewhere only the translation model and its data
(attnbench.models.transformer_nmt, attnbench.data.translation, token_store) import mmengine, and the
vocabulary (attnbench.variants) and the reports (attnbench.sweep.report and the modules it names, claims,
stats) import neither OpenMMLab nor torch. Use it from any mmdet/mmseg/mmengine config with
``custom_imports = dict(imports=['attnbench.mm'], allow_failed_imports=False)``.
"""
import warnings

# mmengine 0.10.7 and mmcv 2.1.0 import pkg_resources (deprecated, still needed; see tools/setup.sh)
warnings.filterwarnings("ignore", message="pkg_resources is deprecated", category=UserWarning)

from . import attention_mass  # noqa: E402, F401
from . import datasets  # noqa: E402, F401
from . import heads  # noqa: E402, F401
from . import hooks  # noqa: E402, F401
from . import metrics  # noqa: E402, F401
from . import nmt  # noqa: F401
from . import plugins  # noqa: E402, F401
from . import vis_backends  # noqa: E402, F401
from .registry import DATASETS, HOOKS, METRICS, MODELS

__all__ = ["DATASETS", "HOOKS", "METRICS", "MODELS"]
