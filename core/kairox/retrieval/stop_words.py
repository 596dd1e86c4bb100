"""English stop words: the function words a keyword query is better without.

The classic list (pronouns, articles, auxiliaries, prepositions, conjunctions and question
words; NLTK's English list without its contractions). A question asks in them ("what did
you ...", "when was she ..."), and BM25 still gives each a small weight on a table of
short messages, where a message made of them alone ("did you do that?") then outranks
the one that holds the answer. FTS5's own ``bm25()`` ignores only terms held by half of
the rows (:mod:`kairox.retrieval.fts5_common`), which none of these is in a conversation.
"""

from __future__ import annotations

from typing import Final

__all__ = ["ENGLISH_STOP_WORDS"]

_WORDS = """a about above after again against all am an and any are as at be because been before
    being below between both but by can could did do does doing down during each few for
    from further had has have having he her here hers herself him himself his how i if in
    into is it its itself just me more most my myself no nor not now of off on once only or
    other our ours ourselves out over own same she should so some such than that the their
    theirs them themselves then there these they this those through to too under until up
    very was we were what when where which while who whom why will with would you your
    yours yourself yourselves"""
ENGLISH_STOP_WORDS: Final = frozenset(_WORDS.split())
