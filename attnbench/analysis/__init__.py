"""The analysis floor: statistics, effects, claims, summaries, plots, published tables, reports, the study's
parts and the gate and attention-map analyses. It reads stores and runs what ``attnbench.sweep`` plans and
launches; nothing below it (``sweep``, ``mm``, the mechanisms) imports it."""
