# Transformer-base (Vaswani et al. 2017, Table 3): 6 + 6 layers, width 512, 8 heads, FFN 2048,
# dropout 0.1, label smoothing 0.1, post-norm; every attention slot standard multi-head attention.
# `vocab_size` must equal the dataset's tokenizer vocab_size.
model = dict(
    type='attnbench.TransformerNMT',
    vocab_size=32000,
    embed_dim=512,
    num_heads=8,
    ffn_dim=2048,
    num_encoder_layers=6,
    num_decoder_layers=6,
    dropout=0.1,
    attention_dropout=0.0,
    pre_norm=False,
    label_smoothing=0.1,
    encoder_self_attention=dict(type='standard'),
    decoder_self_attention=dict(type='standard'),
    cross_attention=dict(type='standard'),
    decode_cfg=dict(beam_size=4, len_penalty=0.6, max_len_a=1.2, max_len_b=10))
