"""The one error type users see: a bad input, told in one line (exit code 2)."""

from __future__ import annotations


class InputError(Exception):
    """An input coreml-lint cannot read: the message is one line naming the file."""
