# transformer-mini with generalized attention '0111' (E1 E2 E3 E4) in the encoder-decoder slot.
_base_ = './transformer-mini_mini-corpus.py'
model = dict(cross_attention=dict(type='generalized', attention_type='0111'))
