"""``ma-submit ui``: a page of your jobs in a browser, served from this machine over the SDK's own API, so local,
ModelArts and Volcano jobs show side by side with the profiles and credentials the CLI uses (docs/ui.md).

Modules, each small: :mod:`.server` (the standard library's HTTP server, the routes, :func:`~.server.serve`),
:mod:`.auth` (the token, the cookie, CSRF), :mod:`.opening` (the browser opened without the token on its command
line), :mod:`.pages` (the HTML), :mod:`.markup` (escaping by construction), :mod:`.svg` (the pictures),
:mod:`.timeline` (attempts from events), :mod:`.listing` (jobs across backends, paged by each backend's index),
:mod:`.logfiles` (a job's own log files only), :mod:`.usage` (usage sampled over time) and :mod:`.command` (the
verb's click command). Nothing here is imported unless the verb runs.
"""

from __future__ import annotations

from typing import List

__all__: List[str] = []
