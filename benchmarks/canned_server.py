"""A server that does no work: every POST is read whole and answered at once with the same
--bytes of JSON-like body, /health with 200. Beside real servers in
benchmarks/render_server_speed.py (--canned), its req/s is what the benchmark's client
reaches by itself: the most any server can be measured at for a case with answers that big.

    python benchmarks/canned_server.py --port 8100 --bytes 30000000
"""

from __future__ import annotations

import argparse
import asyncio


async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, answer: bytes) -> None:
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
    try:
        while True:
            request = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in request.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":", 1)[1])
            await reader.readexactly(length)
            body = answer if request.startswith(b"POST") else b"{}"
            writer.write(head % len(body))
            writer.write(body)
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        writer.close()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--bytes", type=int, default=30_000_000)
    args = parser.parse_args()
    answer = b'{"x":"' + b"A" * max(0, args.bytes - 8) + b'"}'
    server = await asyncio.start_server(lambda r, w: serve(r, w, answer), "127.0.0.1", args.port)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main())
