"""The workbench's version (pyproject.toml holds the same number): a module of its own, so that any layer can
read it without importing the package's façade."""
__version__ = "0.1.0"
