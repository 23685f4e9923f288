# Transformer-base on WMT14 English-German (set data_root and file names in the dataset base).
_base_ = [
    './_base_/models/transformer-base.py', './_base_/datasets/wmt14-ende.py',
    './_base_/schedules/wmt_100k-iters.py', './_base_/default_runtime.py',
]
