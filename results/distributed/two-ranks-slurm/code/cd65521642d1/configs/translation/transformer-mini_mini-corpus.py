# A CPU-sized Transformer (2 + 2 layers, width 64, pre-norm) on the synthetic mini corpus, standard
# multi-head attention in all three slots; sized so that the study's 165 translation runs fit in a
# few CPU-hours and short of saturating the corpus (a 3 + 3, width-128 model trained for 1,000
# iterations reached 99 BLEU with every query-dependent slot and could not tell them apart).
# The corpus is generated into data/mini_corpus/ on first use.
_base_ = [
    './_base_/models/transformer-base.py', './_base_/datasets/mini-corpus.py',
    './_base_/schedules/mini_500-iters.py', './_base_/default_runtime.py',
]
model = dict(
    vocab_size=600,  # = tokenizer.vocab_size of the dataset
    embed_dim=64,
    num_heads=4,
    ffn_dim=256,
    num_encoder_layers=2,
    num_decoder_layers=2,
    pre_norm=True,
    decode_cfg=dict(beam_size=4, len_penalty=1.0))
default_hooks = dict(checkpoint=dict(interval=500))
# One intra-op CPU thread per run, whatever the entry point or --jobs: CPU results depend on it
# (attnbench.mm.run_setup.apply_run_protocol), so runs at one seed stay comparable.
cpu_threads = 1
