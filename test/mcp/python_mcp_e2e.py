"""The official Python MCP client (package `mcp`) against /v1/mcp, as an agent written in Python
uses it: Streamable HTTP with the API key as a header. Driven by test/mcp/python-mcp.test.ts, which
reads the one JSON line this prints and checks the service's side (the ledger) itself.
"""

import asyncio
import base64
import json
import os

from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client


def blocks_of(result):
    """Each content block as a plain dict: its type, MIME type, size and URI."""
    out = []
    for block in result.content:
        item = {"type": block.type}
        if block.type == "image":
            item["mimeType"] = block.mime_type
            item["bytes"] = len(base64.b64decode(block.data))
        if block.type == "resource_link":
            item["uri"] = str(block.uri)
        out.append(item)
    return out


async def main() -> None:
    url = os.environ["MCP_URL"]
    headers = {"Authorization": f"Bearer {os.environ['GENERATION_API_KEY']}"}
    async with create_mcp_http_client(headers=headers) as http:
        async with streamable_http_client(url, http_client=http) as (read, write):
            async with ClientSession(read, write) as session:
                initialized = await session.initialize()
                tools = await session.list_tools()
                created = await session.call_tool(
                    "create_generation",
                    {
                        "request": {"model": "lumen-lite", "prompt": "a lighthouse, from Python"},
                        "idempotency_key": "python-mcp-e2e",
                    },
                )
                again = await session.call_tool(
                    "create_generation",
                    {
                        "request": {"model": "lumen-lite", "prompt": "a lighthouse, from Python"},
                        "idempotency_key": "python-mcp-e2e",
                    },
                )
                too_dear = await session.call_tool(
                    "create_generation",
                    {"request": {"model": "lumen-pro", "prompt": "more than the balance", "resolution": "4K"}},
                )
                credits = await session.call_tool("get_credits", {})
    print(
        json.dumps(
            {
                "protocolVersion": initialized.protocol_version,
                "tools": [tool.name for tool in tools.tools],
                "created": {
                    "isError": bool(created.is_error),
                    "generation": created.structured_content,
                    "blocks": blocks_of(created),
                },
                "again": again.structured_content,
                "tooDear": {
                    "isError": bool(too_dear.is_error),
                    "text": " ".join(b.text for b in too_dear.content if b.type == "text"),
                },
                "credits": credits.structured_content,
            }
        )
    )


asyncio.run(main())
