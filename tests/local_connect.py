"""A local Spark Connect server for the suite's job scripts, on a free port.

``SparkSession.builder.remote("local[2]")`` starts its server on Connect's default port
15002 and dials it: two such processes at once (two pytest-xdist workers, or a user's own
Connect server on the machine) collide. The suite's job scripts start theirs here instead,
on a port no other process holds; only the README's and docs' blocks keep the default, as
printed (their tests share one xdist group, ``connect-default-port``: tests/conftest.py).
"""

from __future__ import annotations

import socket
from typing import Any


def free_port() -> int:
    """A TCP port no process listens on now (the OS's choice)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def local_remote(master: str = "local[2]") -> Any:
    """``SparkSession.builder.remote(master)`` whose server listens on a free port, and
    whose client dials that port (the builder of a local server dials the default port)."""
    from pyspark.sql import SparkSession
    from pyspark.sql.connect.client.core import DefaultChannelBuilder

    port = free_port()
    DefaultChannelBuilder.default_port = staticmethod(lambda: port)  # type: ignore[method-assign]
    return SparkSession.builder.remote(master).config(
        "spark.connect.grpc.binding.port", str(port))
