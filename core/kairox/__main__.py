"""``python -m kairox`` runs the CLI."""

from kairox.cli import main

main()
