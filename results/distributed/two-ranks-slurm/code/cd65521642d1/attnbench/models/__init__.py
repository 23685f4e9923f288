"""Models built on mmengine (the Transformer translation model)."""
