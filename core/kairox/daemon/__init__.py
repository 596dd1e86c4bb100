"""The resident process: a warm facade answering ``kairox search`` and ``kairox context``.

:mod:`kairox.daemon.protocol` and :mod:`kairox.daemon.client` use the standard library
only, so the ``kairox`` console script reaches a running daemon without importing click,
rich or pydantic; the server itself is :mod:`kairox.cli.daemon_server`.
"""
