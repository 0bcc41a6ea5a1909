"""The console script's entry point: nothing heavy is imported before the Ctrl-C handler is in place.

Ctrl-C during the first fraction of a second lands inside `import typer` or `import sympy`; catching
KeyboardInterrupt here (and not only inside the command) turns it into one line instead of a traceback.
"""

from __future__ import annotations

import sys


def run() -> None:
    """`attn-cost`: run the CLI and exit with its code."""
    code = 2
    try:
        from attn_cost.cli.app import finish, main

        code = finish(main())
    except KeyboardInterrupt:
        try:
            from attn_cost.cli.app import interrupted

            code = interrupted()
        except KeyboardInterrupt:
            code = 130
    except BrokenPipeError:
        from attn_cost.cli.app import PIPE_CLOSED, _silence_stdout

        _silence_stdout()
        code = PIPE_CLOSED
    sys.exit(code)
