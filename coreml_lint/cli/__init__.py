"""The command line: ``check`` (the default), ``lower``, ``rule``, ``rules``."""
