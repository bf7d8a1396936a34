"""Generators of derived files (each checked by a test to equal what is committed), and the
engine compiled by mypyc (compile_engine.py: built, never committed)."""
