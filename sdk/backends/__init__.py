"""Backends that run a job: local (default), ModelArts, Volcano."""
