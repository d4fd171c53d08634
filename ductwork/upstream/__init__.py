"""The upstream service: its HTTP client and the walks over its lists, with no Dagster."""
