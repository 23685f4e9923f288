"""The command-line tools' mains, one file each (``tools/<name>.py`` is a thin front that calls
``attnbench.commands.<name>.main``): the top floor, above the analysis, so that an installed attnbench runs
its own sweeps and study reports. Each file's docstring is its ``--help``."""
