"""Write ``sdk/cli/help_text.py``: the group's help of ``ma-submit`` as click renders it at :data:`WIDTH`.

The quick path prints that stored text for ``ma-submit --help`` (and ``-h``) without importing click; run this
after changing a verb, an option or a docstring the group's help shows (``tests/sdk/cli/test_cli_quick_help.py`` fails
until then). Run it with the project's interpreter: ``.venv/bin/python scripts/render_group_help.py``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

#: click's formatter width for a terminal of 80 columns or more, or none: max(min(columns, 80) - 2, 50).
WIDTH = 78
TARGET = Path(__file__).resolve().parents[1] / "sdk" / "cli" / "help_text.py"
_LINE_LENGTH = 120  # the project's line length (pyproject.toml, ruff)

_HEAD = '''"""What ``ma-submit --help`` prints, kept as data so that the quick path (:mod:`.quick`) prints it
without importing click (issue 28). It is click's rendering at :data:`WIDTH`, the width click takes for a terminal
of 80 columns or more, or none; for any other width click answers.

Written by ``scripts/render_group_help.py``, never by hand: a test renders the help with click and fails when the
two differ (run the script then).
"""

from __future__ import annotations

__all__ = ["GROUP_HELP", "WIDTH"]

#: The help formatter's width this text was rendered at.
WIDTH = {width}
#: The group's help as click renders it at :data:`WIDTH`; printed with one newline after it, as click prints it.
GROUP_HELP = (
'''


def render(width: int = WIDTH) -> str:
    """The group's help as click's ``--help`` renders it with a formatter of ``width`` columns (then echoes it)."""
    from malaunch.sdk.cli.app import cli
    from malaunch.sdk.cli.exits import PROG

    ctx = cli.context_class(cli, info_name=PROG, terminal_width=width, **cli.context_settings)
    return ctx.get_help()


def module_source(text: str, width: int = WIDTH) -> str:
    """The source of ``help_text.py`` holding ``text``, one string literal per line of it (``text`` ends with none)."""
    lines = []
    for line in text.splitlines(keepends=True):
        literal = f"    {json.dumps(line)}"
        lines.append(literal + ("  # noqa: E501" if len(literal) > _LINE_LENGTH else "") + "\n")
    return _HEAD.format(width=width) + "".join(lines) + ")\n"


def main() -> int:
    TARGET.write_text(module_source(render()))
    print(f"wrote {TARGET.relative_to(TARGET.parents[2])} (width {WIDTH})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
