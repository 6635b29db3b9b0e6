"""The package version, in a leaf module so any layer can read it without importing the others.

pyproject.toml reads it from here (hatch's ``[tool.hatch.version]``), so it is written once.
"""

__all__ = ["__version__"]

__version__ = "0.1.0"
