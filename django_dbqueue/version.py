"""The package's version, in a module of its own so that rooms inside the
package can read it without importing the package's public entry point."""

__version__ = "0.1.0"
