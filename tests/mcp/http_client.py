"""Drives `runbox serve`'s /mcp with the official Python MCP SDK over streamable HTTP: the
same scenarios as over stdio (stdio_client.py), behind an API key. Prints 'N passed, N failed';
exits non-zero when any failed.

usage: http_client.py URL KEY
"""

import asyncio
import sys

from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

import stdio_client as scenarios


async def main(url, key):
    client = create_mcp_http_client(headers={"Authorization": f"Bearer {key}"})
    async with client:
        async with streamable_http_client(url, http_client=client) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                await scenarios.scenarios(session)
    failed = sum(1 for _, ok in scenarios.RESULTS if not ok)
    print(f"{len(scenarios.RESULTS) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1], sys.argv[2])))
