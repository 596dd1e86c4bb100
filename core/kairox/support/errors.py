"""The base of every error Kairox reports to a user as a message rather than a traceback.

Plugins derive their own errors from :class:`BackendError` (and a timeout from
:class:`BackendTimeoutError`), so the CLI formats them like the core's and a caller can
catch every plugin's failures, or every timeout, with one ``except``.
"""


class KairoxError(Exception):
    """An error whose message says what went wrong and how to fix it."""


class BackendError(KairoxError, RuntimeError):
    """A plugin's backend (an index on disk, a remote service) could not do what was asked."""


class BackendTimeoutError(BackendError, TimeoutError):
    """A plugin's backend did not answer within its deadline."""
