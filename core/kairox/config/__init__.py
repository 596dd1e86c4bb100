"""Configuration: the schema plugins subclass (:mod:`~kairox.config.schema`), reading
the TOML files (:mod:`~kairox.config.files`, :mod:`~kairox.config.loader`) and the
problems a user can fix (:mod:`~kairox.config.problems`).
"""

from kairox.support.moved import forward_names

__getattr__ = forward_names(
    __name__, "kairox.config.schema", "kairox.config.errors", "kairox.config.loaded"
)
