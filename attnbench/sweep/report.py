"""The reporting API in one import: tables, effects and power, claims and plots of a results store.

Each concern lives in its own module (:mod:`~attnbench.sweep.summary`: per-row summary, pairing, the
comparison and cost tables; :mod:`~attnbench.sweep.effects`: main effects and power;
:mod:`~attnbench.sweep.plots`: trade-off and window plots; :mod:`~attnbench.sweep.published`: the model
zoos' numbers); this module names them together, for notebooks and scripts. It imports no torch."""
from attnbench.sweep.effects import factor_effects, power_table
from attnbench.sweep.plots import pareto_front, plot_tradeoffs, plot_windows, save_figure
from attnbench.sweep.published import PUBLISHED
from attnbench.sweep.summary import comparison_table, cost_table, per_seed_table, successful_runs, summarize

__all__ = ["PUBLISHED", "comparison_table", "cost_table", "factor_effects", "pareto_front", "per_seed_table",
           "plot_tradeoffs", "plot_windows", "power_table", "save_figure", "successful_runs", "summarize"]
