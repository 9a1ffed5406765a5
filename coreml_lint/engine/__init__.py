"""The engines that run the rules: over programs (``program``, with the combined ``advice``
and the in-memory ``exported`` adapter) and over model sources (``source``)."""
