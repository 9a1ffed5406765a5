"""Output formats: ``text`` (full, concise, statistics, advice), ``machine`` (json, github,
sarif), ``html`` (one self-contained page) and ``model_explorer`` (a node-data overlay for
Google's Model Explorer: ``--output-format model-explorer``)."""
