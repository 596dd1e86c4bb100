"""The built-in ``openai-compatible`` model backend: streaming chat over HTTP.

Talks the OpenAI Chat Completions protocol, which OpenAI, vLLM, Ollama (``/v1``),
llama.cpp's server, LM Studio and most gateways speak. This module is the plugin: the
profile keys the backend owns, its factory and its registration. The work is done in
:mod:`.model` (the request, retries and HTTP errors), :mod:`.reply` (reading the streamed
reply), :mod:`.sse` (server-sent events) and :mod:`.errors` (what a failing server said).

``httpx`` is imported on first use, not when the plugin loads, so ``import kairox`` and
commands that never talk to a model stay light.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import Field, StrictStr

from kairox.config.schema import PluginSettings
from kairox.default_plugins.openai_compatible.errors import ModelHTTPError, parse_retry_after
from kairox.default_plugins.openai_compatible.model import (
    DEFAULT_BASE_URL,
    DEFAULT_RETRY,
    OpenAICompatibleModel,
)
from kairox.default_plugins.openai_compatible.sse import ServerSentEvent, SSEDecoder
from kairox.plugin_host.registry import ModelBackendContext, ModelBackendSpec, registers
from kairox.support.models import check_backend_options
from kairox.support.retry import RetryPolicy

__all__ = [
    "DEFAULT_BASE_URL",
    "DEFAULT_RETRY",
    "ModelHTTPError",
    "OpenAICompatibleModel",
    "OpenAICompatibleSettings",
    "SSEDecoder",
    "ServerSentEvent",
    "build_openai_compatible_model",
    "parse_retry_after",
]


def build_openai_compatible_model(**options: Any) -> OpenAICompatibleModel:
    """The registry factory: ``base_url`` (default OpenAI's), ``api_key_env``,
    ``timeout_s``, ``retry`` (a :class:`RetryPolicy` or a mapping of its fields),
    ``extra_headers``."""
    check_backend_options(
        "openai-compatible",
        options,
        {"base_url", "api_key_env", "timeout_s", "retry", "extra_headers"},
    )
    retry = options.get("retry")
    if isinstance(retry, Mapping):
        options["retry"] = RetryPolicy(**retry)
    base_url = options.pop("base_url", None) or DEFAULT_BASE_URL
    return OpenAICompatibleModel(base_url, **options)


class OpenAICompatibleSettings(PluginSettings):
    """The keys of ``[profiles.<name>]`` this backend owns."""

    base_url: StrictStr = DEFAULT_BASE_URL
    api_key_env: StrictStr | None = "OPENAI_API_KEY"
    timeout_s: float = Field(default=60.0, gt=0, allow_inf_nan=False)


def _from_profile(ctx: ModelBackendContext) -> OpenAICompatibleModel:
    settings = ctx.settings if ctx.settings is not None else OpenAICompatibleSettings()
    return build_openai_compatible_model(**{**settings.model_dump(), **ctx.options})


kairox_register_model_backends = registers(
    ModelBackendSpec(
        name="openai-compatible",
        factory=_from_profile,
        description=(
            "Streaming chat over the OpenAI Chat Completions API "
            "(OpenAI, vLLM, Ollama, llama.cpp, LM Studio)."
        ),
        config_model=OpenAICompatibleSettings,
    )
)
