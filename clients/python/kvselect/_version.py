"""The client's release, PEP 440. It follows the server's release line
(internal/version.Version: 0.5.0-dev is 0.5.0.dev0 here); a Go test keeps
the two on the same major.minor and this file equal to pyproject.toml."""

__version__ = "0.5.0.dev0"
