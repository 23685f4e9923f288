"""The sweep: plan, run, record, plot. The modules that build models (catalog, dry_run, worker) import
OpenMMLab through attnbench.mm; the store, the plan and the report do not, so reading results is fast."""
