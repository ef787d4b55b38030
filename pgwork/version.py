"""The package version, in a module of its own so any layer can read it without importing the
`pgwork` façade (which re-exports the worker's handler API)."""

__version__ = "0.1.0"
