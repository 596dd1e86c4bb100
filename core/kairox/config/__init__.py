"""Configuration: the schema plugins subclass (:mod:`~kairox.config.schema`), reading and
checking the TOML files (:mod:`~kairox.config.loader`, :mod:`~kairox.config.files`,
:mod:`~kairox.config.checks`) into a :mod:`~kairox.config.loaded` configuration, and the
problems a user can fix (:mod:`~kairox.config.errors`, :mod:`~kairox.config.problems`).
"""

from kairox.support.moved import forward_names

__getattr__ = forward_names(
    __name__, "kairox.config.schema", "kairox.config.errors", "kairox.config.loaded"
)
