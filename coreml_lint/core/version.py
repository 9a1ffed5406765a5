"""The package version, importable from any layer."""

__version__ = "0.5.0"
