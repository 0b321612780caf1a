"""The provider catalogue and the start rules for a model name.

Credentials are read only from the server's environment (or ``examples/.env``);
the browser learns whether a provider is configured, never the value.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

MOCK_MODEL = "mock/dex"


@dataclass(frozen=True)
class Provider:
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
    Provider("custom", "Other LiteLLM provider", None, "", "LITELLM_API_KEY"),
)
PROVIDERS_BY_ID = {provider.id: provider for provider in PROVIDERS}

# The providers this app can call today; the others need a LiteLLM model client
# (dex-agents[litellm]), which the library does not have yet.
RUNNABLE_PROVIDERS = frozenset({"mock", "openai", "anthropic"})


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
        if "/" not in name:
            raise StartRuleError("model for a custom provider must look like provider/model")
        return name
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
    if provider.id not in RUNNABLE_PROVIDERS:
        raise StartRuleError(
            f"{provider.id} needs a LiteLLM model client, which this build does not include yet"
        )
