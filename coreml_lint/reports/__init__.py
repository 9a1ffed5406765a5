"""Report renderers that need more than a line per finding: the HTML delegation report and
the Model Explorer node-data overlay. Torch-free, like the rest of the linting path."""
