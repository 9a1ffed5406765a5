"""``coreml-lint --export``: build the programs a project declares, export them with
``torch.export``, cache them by content, and lint them with the program engine.

torch is imported only when a program has to be exported again (``build.py``); a run whose
declared programs are all in the cache reads them back torch-free.
"""
