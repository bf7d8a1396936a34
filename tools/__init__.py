"""Generators of derived files (each checked by a test to equal what is committed)."""
