"""The shared vocabulary every layer speaks: findings, errors, settings, configuration,
suppression comments and safe file writes. Imports nothing else of coreml-lint."""
