"""How a server's answer to `tools/call` becomes the text the model sees.

Text blocks are joined; structured content is shown as JSON text when no text block
carries it (the spec asks servers to mirror it in text, which is then shown as sent);
images, audio and resources are named with their type and size, never dropped silently.
`isError` makes the outcome an error the model sees.

Rule: the SDK's result types in, text out; no calls, no tools.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from mcp import types

NO_OUTPUT = "(no output)"


def rendered(result: types.CallToolResult) -> tuple[str, bool]:
    """The result's text and whether the tool reported an error."""
    parts: list[str] = []
    has_text = False
    for block in result.content:
        if isinstance(block, types.TextContent):
            has_text = True
            parts.append(block.text)
        else:
            parts.append(named(block))
    structured = result.structured_content
    if structured is not None and not has_text:
        parts.insert(0, json.dumps(structured, ensure_ascii=False, default=str))
    return ("\n".join(parts) if parts else NO_OUTPUT), bool(result.is_error)


def named(block: Any) -> str:
    """A one-line stand-in for a block that is not text."""
    if isinstance(block, types.ImageContent | types.AudioContent):
        kind = "image" if isinstance(block, types.ImageContent) else "audio"
        return f"[{kind}: {block.mime_type}, {_size(block.data)}; not shown]"
    if isinstance(block, types.ResourceLink):
        about = ", ".join(x for x in (block.mime_type, block.description) if x)
        return f"[resource link: {block.name} <{block.uri}>{f' ({about})' if about else ''}]"
    if isinstance(block, types.EmbeddedResource):
        resource = block.resource
        mime = f", {resource.mime_type}" if resource.mime_type else ""
        if isinstance(resource, types.TextResourceContents):
            return f"[resource <{resource.uri}>{mime}]\n{resource.text}"
        return f"[resource <{resource.uri}>{mime}, {_size(resource.blob)}; not shown]"
    return f"[{getattr(block, 'type', type(block).__name__)} content; not shown]"


def _size(data: str) -> str:
    try:
        return f"{len(base64.b64decode(data, validate=True)):,} bytes"
    except (binascii.Error, ValueError):
        return f"{len(data):,} characters of data that is not valid base64"
