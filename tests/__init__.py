"""The test suite (a package, so that tests import shared helpers one way)."""
