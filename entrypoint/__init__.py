"""malaunch.entrypoint: the in-container shim ``ma-entrypoint`` (standard library only)."""
