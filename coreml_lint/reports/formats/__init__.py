"""The output formats, one module each (``reports/registry.py`` reads them)."""
