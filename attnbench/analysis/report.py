"""The reporting API in one import: tables, effects and power, claims and plots of a results store.

Each concern lives in its own module (:mod:`~attnbench.analysis.summary`: per-row summary, pairing, the
comparison and cost tables; :mod:`~attnbench.analysis.effects`: main effects and power;
:mod:`~attnbench.analysis.plots`: trade-off and window plots; :mod:`~attnbench.analysis.published`: the model
zoos' numbers); this module names them together, for notebooks and scripts. It imports no torch."""
from attnbench.analysis.effects import factor_effects, power_table
from attnbench.analysis.plots import pareto_front, plot_tradeoffs, plot_windows, save_figure
from attnbench.analysis.published import PUBLISHED
from attnbench.analysis.summary import comparison_table, cost_table, per_seed_table, successful_runs, summarize

__all__ = ["PUBLISHED", "comparison_table", "cost_table", "factor_effects", "pareto_front", "per_seed_table",
           "plot_tradeoffs", "plot_windows", "power_table", "save_figure", "successful_runs", "summarize"]
