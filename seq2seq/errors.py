"""The one exception type users see: a one-line message saying what to do."""


class UserError(Exception):
    """Bad input or state that the user can fix; the CLI prints it on one line, no traceback."""
