"""The rule API: what a rule is (``rule.Rule``), what it reads (``context.ProgramContext``,
and ``source.context.SourceContext`` for model code), its examples (``examples``), and the
helpers its source fix (``cst``) and lowering answer (``fx``, heavy) build on."""
