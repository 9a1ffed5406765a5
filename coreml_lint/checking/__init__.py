"""The check run: lint ``.pt2`` programs and model sources, fix the sources, and (when asked)
export the declared programs, measure what the op table lacks and lower with the advice.

``coreml-lint check`` and the Python API (:func:`coreml_lint.check`) run the same
:class:`~coreml_lint.checking.run.CheckRun`; the command line only parses arguments and
prints. It sits beside ``fixers``, ``exporting``, ``sweep`` and ``lowering`` (layer 5)
because it drives them; the engine below runs the rules and knows none of them.
"""
