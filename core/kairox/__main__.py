"""``python -m kairox`` runs what the ``kairox`` console script runs (kairox.launcher)."""

import sys

from kairox.launcher import main

sys.exit(main())
