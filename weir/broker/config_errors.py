"""The one error every settings module raises."""

from __future__ import annotations


class ConfigError(Exception):
    """A setting is missing, malformed or unusable; the message is one line."""
