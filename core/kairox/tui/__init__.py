"""The terminal UI of ``kairox tui``: chat, inline memory approval and a trace panel.

Importing this package imports Textual; the CLI imports it only inside the ``tui``
command, so ``kairox --help`` and the other commands stay light.
"""

from kairox.tui.app import KairoxApp

__all__ = ["KairoxApp"]
