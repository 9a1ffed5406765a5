"""Engine, configuration, reports and CLI of coreml-lint."""
