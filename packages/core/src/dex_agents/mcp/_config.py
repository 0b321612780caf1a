"""Server configurations for ``McpToolSource``: stdio and Streamable HTTP.

Configure servers on the Worker only, never from Flow input, a message or a
browser: a stdio server's command runs with the Worker's privileges.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, field_validator

__all__ = ["McpHttpServer", "McpServerConfig", "McpStdioServer", "load_mcp_server_configs"]

_SERVER_NAME = re.compile(r"^[A-Za-z0-9_-]+$")


class _ServerBase(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    """Unique in the source; the prefix of every tool name (``<name>__<tool>``)."""
    trusts_tool_annotations: bool = True
    """Classify tools by their ``readOnlyHint``/``idempotentHint``; ``False`` gives every
    tool of this server the default effect."""
    destructive_tools_require_approval: bool = False
    """Ask for approval before an ``idempotent_write`` tool whose ``destructiveHint`` is
    not ``false`` (MCP's default is ``true``); the default follows the effect, no approval."""
    connection_timeout_seconds: float = Field(default=30.0, gt=0)
    """How long opening the server's session and its handshake may take, per attempt; also
    the limit for each page of a listing."""

    @field_validator("name")
    @classmethod
    def _valid_name(cls, name: str) -> str:
        if not _SERVER_NAME.match(name) or "__" in name:
            raise ValueError(
                f"server name {name!r} must be letters, digits, '_' and '-' without '__'"
            )
        return name


class McpStdioServer(_ServerBase):
    """A server the Worker starts as a child process and talks to over stdin/stdout."""

    transport: Literal["stdio"] = "stdio"
    command: str = Field(min_length=1)
    args: tuple[str, ...] = ()
    env: dict[str, str] | None = None
    """Extra environment variables for the child process."""
    cwd: str | None = None


class McpHttpServer(_ServerBase):
    """A server at a Streamable HTTP endpoint."""

    transport: Literal["streamable_http"] = "streamable_http"
    url: str = Field(pattern=r"^https?://")
    headers: dict[str, str] = Field(default_factory=dict[str, str])
    """Sent with every request, such as ``Authorization``."""


McpServerConfig = Annotated[McpStdioServer | McpHttpServer, Field(discriminator="transport")]
"""One server: ``McpStdioServer`` or ``McpHttpServer``, told apart by ``transport``."""

_CONFIG_FILE = TypeAdapter(list[McpServerConfig])


def load_mcp_server_configs(path: str | Path) -> Sequence[McpStdioServer | McpHttpServer]:
    """The servers in a file: ``{"servers": [{"transport": "stdio", ...}, ...]}``.

    JSON, or YAML for a ``.yaml`` or ``.yml`` file (needs PyYAML). Each entry takes the
    fields of ``McpStdioServer`` or ``McpHttpServer``, told apart by ``transport``.
    Raises ``ValueError`` naming the file and the problem.
    """
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
        document = _parse_yaml(text) if file.suffix in (".yaml", ".yml") else json.loads(text)
    except (OSError, ValueError) as error:
        raise ValueError(f"cannot read MCP server configuration {file}: {error}") from None
    if not isinstance(document, dict) or not isinstance(document.get("servers"), list):  # pyright: ignore[reportUnknownMemberType]
        raise ValueError(f'MCP server configuration {file} must be {{"servers": [...]}}')
    try:
        servers = _CONFIG_FILE.validate_python(document["servers"])
    except ValidationError as error:
        raise ValueError(f"invalid MCP server configuration {file}: {error}") from None
    names = [server.name for server in servers]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise ValueError(f"MCP server configuration {file} names {duplicates} twice")
    return servers


def _parse_yaml(text: str) -> Any:
    try:
        import yaml
    except ImportError:
        raise ValueError("a YAML file needs PyYAML: `pip install pyyaml`") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise ValueError(str(error)) from None
