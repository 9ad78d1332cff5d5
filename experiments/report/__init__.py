"""Reporting: human tables of result documents, plots (the only module importing matplotlib)
and the generated Markdown blocks of the README and ``docs/``."""
