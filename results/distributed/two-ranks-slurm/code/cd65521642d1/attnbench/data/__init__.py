"""Data generators and loaders (mini shapes, mini parallel corpus, WMT-style text files)."""
