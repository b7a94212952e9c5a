"""How the small commands (bnpvi-data, bnpvi-apply) report bad input: one stderr line, exit status 2."""
from __future__ import annotations

import sys
from typing import Callable

from bnpvi.errors import BnpviError


def run_reporting(prog: str, action: Callable[[], None]) -> int:
    """Run ``action``; 0 on success, 2 on bad input (a BnpviError or an OSError, reported on one line as
    ``PROG: error: ...``), 130 on Ctrl-C."""
    try:
        action()
    except BnpviError as err:
        print(f"{prog}: error: {' '.join(str(err).split())}", file=sys.stderr)
        return 2
    except OSError as err:
        print(f"{prog}: error: {err.strerror or err}" + (f": {err.filename}" if err.filename else ""),
              file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
    return 0
