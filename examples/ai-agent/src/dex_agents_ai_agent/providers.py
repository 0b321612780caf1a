"""The provider catalogue and the start rules for a model name.

Credentials are read only from the server's environment (or ``examples/.env``);
the browser learns whether a provider is configured, never the value.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dex_agents.models import ModelClient

MOCK_MODEL = "mock/dex"
CUSTOM_BASE_URL_VARIABLE = "DEX_AGENT_CUSTOM_BASE_URL"
CUSTOM_API_KEY_VARIABLE = "DEX_AGENT_CUSTOM_API_KEY"
CUSTOM_PREFIX = "custom"
# Sent to a custom server that has no key: never fall back to another provider's key.
NO_API_KEY = "no-key"


@dataclass(frozen=True)
class Provider:
    """One catalogue entry. ``environment_variable`` is what makes it configured (the
    key, or the custom server's base URL)."""

    id: str
    label: str
    prefix: str | None
    default_model: str
    environment_variable: str | None

    def is_configured(self, environ: Mapping[str, str]) -> bool:
        if self.environment_variable is None:
            return True
        return bool(environ.get(self.environment_variable, "").strip())

    def to_json(self, environ: Mapping[str, str]) -> dict[str, object]:
        return {
            "id": self.id,
            "label": self.label,
            "prefix": self.prefix,
            "defaultModel": self.default_model,
            "environmentVariable": self.environment_variable,
            "isConfigured": self.is_configured(environ),
        }


PROVIDERS: tuple[Provider, ...] = (
    Provider("mock", "Local mock", None, MOCK_MODEL, None),
    Provider("openai", "OpenAI", "openai", "gpt-5-mini", "OPENAI_API_KEY"),
    Provider("anthropic", "Anthropic", "anthropic", "claude-sonnet-4-5", "ANTHROPIC_API_KEY"),
    Provider("gemini", "Google Gemini", "gemini", "gemini-2.5-flash", "GEMINI_API_KEY"),
    Provider("groq", "Groq", "groq", "llama-3.3-70b-versatile", "GROQ_API_KEY"),
    Provider(
        "custom",
        "Custom OpenAI-compatible server",
        CUSTOM_PREFIX,
        "",
        CUSTOM_BASE_URL_VARIABLE,
    ),
)
PROVIDERS_BY_ID = {provider.id: provider for provider in PROVIDERS}


class StartRuleError(ValueError):
    """A start request breaks a rule; the message is shown to the user."""


def resolve_model_name(provider: Provider, model: str | None) -> str:
    """The full ``provider/model`` name a session uses, by the brief's start rules."""
    if provider.id == "mock":
        return MOCK_MODEL
    name = (model or "").strip()
    if not name:
        raise StartRuleError("model must not be blank")
    if provider.prefix is None:
        return name
    if provider.id == "custom":
        # A custom server's own model names often hold a slash (meta-llama/...): keep them.
        return name if name.startswith(f"{CUSTOM_PREFIX}/") else f"{CUSTOM_PREFIX}/{name}"
    if "/" in name:
        prefix = name.split("/", 1)[0]
        if prefix != provider.prefix:
            raise StartRuleError(f"model for {provider.id} must start with {provider.prefix}/")
        return name
    return f"{provider.prefix}/{name}"


def check_configured(provider: Provider, environ: Mapping[str, str] | None = None) -> None:
    """Refuse a provider whose credential the server's environment lacks."""
    values = os.environ if environ is None else environ
    if not provider.is_configured(values):
        raise StartRuleError(
            f"{provider.id} is not configured; set {provider.environment_variable} in "
            "examples/.env and restart the app"
        )


LITELLM_PROVIDERS = frozenset({"gemini", "groq", "custom"})
"""The providers whose client is ``LiteLLMModelClient``."""


def uses_litellm(environ: Mapping[str, str] | None = None) -> bool:
    """Whether a provider served through LiteLLM is configured, so a session may choose it."""
    values = os.environ if environ is None else environ
    return any(
        provider.id in LITELLM_PROVIDERS and provider.is_configured(values)
        for provider in PROVIDERS
    )


def provider_model_name(model: str) -> str:
    """The name the provider knows: the session's model without its first prefix."""
    return model.split("/", 1)[1] if "/" in model else model


def create_model_client(
    provider_id: str,
    model: str,
    environ: Mapping[str, str] | None = None,
    http_client: Any = None,
    api_base: str | None = None,
) -> ModelClient | None:
    """The provider client for a session's ``model``, its key read from ``environ``
    (the process environment by default); ``None`` for the mock provider.

    OpenAI and Anthropic use the core's native clients; ``http_client`` (an
    ``httpx2.AsyncClient``) replaces their SDK's transport in tests. Gemini, Groq and a
    custom server go through ``LiteLLMModelClient`` (``dex-agents[litellm]``, imported
    only here, when one of them is chosen); ``api_base`` replaces Gemini's or Groq's
    endpoint in tests."""
    values = os.environ if environ is None else environ
    provider = PROVIDERS_BY_ID.get(provider_id)
    if provider is None or provider.id == "mock":
        return None
    name = provider_model_name(model)
    if provider.id == "anthropic":
        import anthropic

        from dex_agents.models import AnthropicModelClient

        return AnthropicModelClient(
            name,
            client=anthropic.AsyncAnthropic(
                api_key=_key(provider, values), http_client=http_client
            ),
        )
    if provider.id == "openai":
        import openai

        from dex_agents.models import OpenAIResponsesModelClient

        return OpenAIResponsesModelClient(
            name, client=openai.AsyncOpenAI(api_key=_key(provider, values), http_client=http_client)
        )
    from dex_agents.models import LiteLLMModelClient

    if provider.id == "custom":
        base_url = values.get(CUSTOM_BASE_URL_VARIABLE, "").strip()
        if not base_url:
            raise ValueError(f"{provider.id} has no base URL; set {CUSTOM_BASE_URL_VARIABLE}")
        api_key = values.get(CUSTOM_API_KEY_VARIABLE, "").strip() or NO_API_KEY
        # LiteLLM's "openai/" route: any OpenAI-compatible server at api_base.
        return LiteLLMModelClient(
            f"openai/{name}", api_base=base_url, api_key=api_key, provider=provider.id
        )
    # LiteLLM's own route for the provider ("gemini/...", "groq/...").
    return LiteLLMModelClient(
        f"{provider.prefix}/{name}",
        api_key=_key(provider, values),
        api_base=api_base,
        provider=provider.id,
    )


def _key(provider: Provider, environ: Mapping[str, str]) -> str:
    variable = provider.environment_variable or ""
    key = environ.get(variable, "").strip()
    if not key:
        raise ValueError(f"{provider.id} is not configured; set {variable} on the Worker")
    return key
