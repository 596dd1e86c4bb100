"""Converters: documents (Markdown, HTML, PDF, Office, notebooks) as text with structure.

:mod:`.base` defines what a converter is and returns, :mod:`.converters` the set in
force and reading a file through it, :mod:`.sections` chunking converted text along its
structure. Plugins add converters through ``kairox_register_converters``.
"""
