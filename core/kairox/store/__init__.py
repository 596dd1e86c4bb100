"""What Kairox keeps: the SQLite plumbing every store shares (:mod:`~kairox.store.sqlite`),
the event log (:mod:`~kairox.store.events`) and the messages read back from it.
"""
