"""chainlang's version, in a leaf module: the output formats (SARIF's tool version) and the
CLI read it without importing the package's public API (`chainlang/__init__.py`, which
sits above every layer)."""

__version__ = "0.1.0"  # keep equal to pyproject.toml's [project] version
