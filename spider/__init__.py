"""spider: a multi-process web crawler whose whole state lives in plain text files."""

__version__ = "0.1.0"
