"""Change notifications: subscriptions and their signed, ordered deliveries (no Dagster)."""
