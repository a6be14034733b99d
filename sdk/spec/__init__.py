"""The job spec: what a job file says, with no backend's knowledge of how to run it.

- :mod:`.model`: the frozen dataclasses whose fields are the job file's keys (``JobSpec``, ``Resources``,
  ``LauncherOptions``, ``DataSpec``), validated on construction; ``JobSpec`` also holds each backend's own
  section (``VolcanoOptions``, ``ModelArtsOptions``: declared, checked and read in ``<backend>/options.py``);
- :mod:`.checks`: the checks a value goes through, shared with the backends' sections;
- :mod:`.loader`: YAML text or a mapping -> ``JobSpec``; each backend's own section is read by a hook the
  backend declares (:func:`malaunch.sdk.backends.options_hook`).

The package itself imports nothing (its names are its modules'), so that a verb reading a job's status, which
uses the model, loads no YAML parser.
"""

from __future__ import annotations

__all__: list[str] = []
