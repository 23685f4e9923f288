"""The sweep: plan, run, record, plot. Imports OpenMMLab (through attnbench.mm's registries)."""
from attnbench import mm  # noqa: F401  registers attnbench's modules and datasets
