"""Context assembly: token accounting with offline tiktoken encodings (see :mod:`.tokens`)."""

from kairox.context.tokens import (
    DEFAULT_ENCODING,
    MESSAGE_OVERHEAD_TOKENS,
    NAME_OVERHEAD_TOKENS,
    REPLY_PRIMING_TOKENS,
    SUPPORTED_ENCODINGS,
    Encoding,
    TokenCounter,
    TokenizerDataError,
    count_message_tokens,
    count_tokens,
    get_encoding,
    load_bpe_ranks,
)

__all__ = [
    "DEFAULT_ENCODING",
    "MESSAGE_OVERHEAD_TOKENS",
    "NAME_OVERHEAD_TOKENS",
    "REPLY_PRIMING_TOKENS",
    "SUPPORTED_ENCODINGS",
    "Encoding",
    "TokenCounter",
    "TokenizerDataError",
    "count_message_tokens",
    "count_tokens",
    "get_encoding",
    "load_bpe_ranks",
]
