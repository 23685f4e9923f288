"""The sweep: plan, run, record, plot (imports OpenMMLab through attnbench.mm)."""
