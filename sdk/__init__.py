"""malaunch.sdk: job specs, ``ma-submit`` and the backends."""
