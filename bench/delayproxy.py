#!/usr/bin/env python3
"""A TCP proxy on 127.0.0.1 that holds each chunk the server sends back for DELAY seconds.

    delayproxy.py LISTEN_PORT TARGET_PORT DELAY_S

bench/mongo.sh's `mjs-delay` server: mongo-java-server answering DELAY later, so boardd's
CPU per request can be compared on one backend at two latencies (FerretDB answers in
milliseconds where mongo-java-server answers in a fraction of one). Requests pass at once.
Runs until killed; stdlib only.
"""
import asyncio
import sys


async def pipe(reader, writer, delay):
    try:
        while True:
            data = await reader.read(65536)
            if not data:
                break
            if delay:
                await asyncio.sleep(delay)
            writer.write(data)
    except (ConnectionError, asyncio.CancelledError):
        pass
    finally:
        try:
            writer.close()
        except ConnectionError:
            pass


async def main(listen_port, target_port, delay):
    async def handle(client_r, client_w):
        server_r, server_w = await asyncio.open_connection('127.0.0.1', target_port)
        asyncio.create_task(pipe(client_r, server_w, 0))
        asyncio.create_task(pipe(server_r, client_w, delay))

    server = await asyncio.start_server(handle, '127.0.0.1', listen_port)
    async with server:
        await server.serve_forever()


if __name__ == '__main__':
    asyncio.run(main(int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])))
