"""The one exception type users see: a clear, one-line message about bad input."""
import math
import operator


class BnpviError(Exception):
    """Bad input or state that the user can fix (wrong shape, NaN, missing file, ...).

    The command-line tools print ``str(error)`` on one line and exit non-zero.
    """


class BadValues(BnpviError, ValueError):
    """A BnpviError about the values of the data (missing entries a family cannot model): also a ValueError, as
    scikit-learn's conventions and checks expect of an estimator given such data."""


def check_number(value, name: str, minimum: float = 0.0, strict: bool = True) -> float:
    """``value`` as a finite float above ``minimum`` (or at least it, when not ``strict``).

    Raises
    ------
    BnpviError
        "{name} must be a number > {minimum}, got {value}" (one line).
    """
    rule = f"a number {'>' if strict else '>='} {minimum:g}"
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise BnpviError(f"{name} must be {rule}, got {value!r}") from None
    if not math.isfinite(number) or number < minimum or (strict and number == minimum):
        raise BnpviError(f"{name} must be {rule}, got {value!r}")
    return number


def check_int(value, name: str, minimum: int = 0) -> int:
    """``value`` as an integer of at least ``minimum`` (an int, or a float with an integer value).

    Raises
    ------
    BnpviError
        "{name} must be an integer >= {minimum}, got {value}" (one line).
    """
    message = f"{name} must be an integer >= {minimum}, got {value!r}"
    if isinstance(value, bool):
        raise BnpviError(message)
    try:
        number = operator.index(value)
    except TypeError:
        if not (isinstance(value, float) and value.is_integer()):
            raise BnpviError(message) from None
        number = int(value)
    if number < minimum:
        raise BnpviError(message)
    return int(number)
