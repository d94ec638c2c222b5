"""lazyfuel."""
