# A CPU-sized Transformer (3 + 3 layers, width 128, pre-norm) on the synthetic mini corpus, standard
# multi-head attention in all three slots. The corpus is generated into data/mini_corpus/ on first use.
_base_ = [
    './_base_/models/transformer-base.py', './_base_/datasets/mini-corpus.py',
    './_base_/schedules/mini_1k-iters.py', './_base_/default_runtime.py',
]
model = dict(
    vocab_size=600,  # = tokenizer.vocab_size of the dataset
    embed_dim=128,
    num_heads=4,
    ffn_dim=512,
    num_encoder_layers=3,
    num_decoder_layers=3,
    pre_norm=True,
    decode_cfg=dict(beam_size=4, len_penalty=1.0))
default_hooks = dict(checkpoint=dict(interval=1000))
