"""The base of every error Kairox reports to a user as a message rather than a traceback."""


class KairoxError(Exception):
    """An error whose message says what went wrong and how to fix it."""
