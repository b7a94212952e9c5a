"""The one exception type users see: a clear, one-line message about bad input."""


class BnpviError(Exception):
    """Bad input or state that the user can fix (wrong shape, NaN, missing file, ...).

    The command-line tools print ``str(error)`` on one line and exit non-zero.
    """
