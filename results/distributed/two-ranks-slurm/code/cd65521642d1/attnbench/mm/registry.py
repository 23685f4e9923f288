"""attnbench's OpenMMLab registries: children of mmengine's roots under the scope ``attnbench``.

Any config, whatever its ``default_scope``, names attnbench's classes ``attnbench.<Name>`` once
``attnbench.mm`` is imported (``custom_imports = dict(imports=['attnbench.mm'])``), without clashing
with mmcv's own ``GeneralizedAttention``, ``DCN`` or ``DCNv2``.
"""
from mmengine.registry import DATA_SAMPLERS as MMENGINE_DATA_SAMPLERS
from mmengine.registry import DATASETS as MMENGINE_DATASETS
from mmengine.registry import FUNCTIONS as MMENGINE_FUNCTIONS
from mmengine.registry import HOOKS as MMENGINE_HOOKS
from mmengine.registry import METRICS as MMENGINE_METRICS
from mmengine.registry import MODELS as MMENGINE_MODELS
from mmengine.registry import VISBACKENDS as MMENGINE_VISBACKENDS
from mmengine.registry import Registry

MODELS = Registry("model", parent=MMENGINE_MODELS, scope="attnbench", locations=["attnbench.mm"])
DATASETS = Registry("dataset", parent=MMENGINE_DATASETS, scope="attnbench", locations=["attnbench.mm"])
METRICS = Registry("metric", parent=MMENGINE_METRICS, scope="attnbench", locations=["attnbench.mm"])
HOOKS = Registry("hook", parent=MMENGINE_HOOKS, scope="attnbench", locations=["attnbench.mm"])
DATA_SAMPLERS = Registry("data sampler", parent=MMENGINE_DATA_SAMPLERS, scope="attnbench",
                         locations=["attnbench.mm"])
FUNCTIONS = Registry("function", parent=MMENGINE_FUNCTIONS, scope="attnbench", locations=["attnbench.mm"])
VISBACKENDS = Registry("vis_backend", parent=MMENGINE_VISBACKENDS, scope="attnbench", locations=["attnbench.mm"])
