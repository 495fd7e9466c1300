"""Whether a development server's port is free before it starts
(``kclient zookeeper``, ``kclient cluster``): a server that fails to bind
may exit only after another process on the same port answered its
readiness probe, and would be reported as running."""

from __future__ import annotations

import socket

__all__ = ["ensure_free"]


def ensure_free(host: str, port: int) -> None:
    """Raise if ``host:port`` cannot be bound now (port 0: nothing to check).

    Binds with ``SO_REUSEADDR``, as servers do, so a port left in
    TIME_WAIT by a server that just stopped counts as free.

    Args:
        host: The address the server will bind.
        port: Its TCP port; 0 lets the server pick one.

    Raises:
        OSError: The port is taken (``errno`` EADDRINUSE); the message
            names the address: ``cannot listen on HOST:PORT: Address
            already in use``.
    """
    if port == 0:
        return
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror:
        return  # the server reports an unknown host itself
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as exc:
            raise OSError(exc.errno, f"cannot listen on {host}:{port}: {exc.strerror or exc}") from exc
