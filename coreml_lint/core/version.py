"""The package version, importable from any layer."""

__version__ = "0.5.0"

# The torch the heavy install is calibrated against (pyproject.toml's `lower` extra pins it).
TORCH_PIN = "torch==2.13.0"
# How to get the heavy install, as the README's Install section says it: there is no release
# on an index, and an unpinned torch pulls a multi-GB CUDA build.
HEAVY_INSTALL_COMMAND = f'pip install "./coreml-lint[lower]" "{TORCH_PIN}"'
HEAVY_INSTALL = (
    f"from a clone of coreml-lint, {HEAVY_INSTALL_COMMAND} "
    "(pin torch: an unpinned one pulls a multi-GB CUDA build)"
)
