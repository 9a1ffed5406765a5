"""Output formats: ``text`` (full, concise, statistics, placement, advice), ``machine``
(json, github, sarif) and ``html`` (one self-contained page)."""
