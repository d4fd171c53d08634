"""Helpers the tests share: running the CLI, syncing, and reading the read API."""
