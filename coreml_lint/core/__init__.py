"""The shared vocabulary every layer speaks: findings, errors, settings, configuration,
suppression comments, safe file writes and the stacks' timed stages. Imports nothing else
of coreml-lint."""
