"""Reaching a host by one deadline: names resolved in a daemon thread (with the last good
answer kept in :data:`~softwalltime.hook.state.STATE`), the addresses of a name and the
hosts of a list sharing the time left, non-blocking connects.

Hook path: Python 3.6+ syntax, standard library only.
"""

import errno
import os
import socket
import sys
import threading
import time
from typing import Any, List, Optional, Tuple

from ...errors import DatabaseError
from ..state import STATE
from .wire import Timeout, wait_ready


def _share(now: float, deadline: float, left: int) -> float:
    """The deadline of one of ``left`` attempts still to make before ``deadline``: a fair
    part of the time left, so that one that hangs cannot starve the others, and one that
    fails fast gives its time to those after it."""
    return now + max(0.0, deadline - now) / max(1, left)


# The name resolver: socket.getaddrinfo, run in a daemon thread so that an event waits for
# it only until its deadline (a silent DNS server blocks getaddrinfo 5 s per nameserver and
# try). It is the package's GETADDRINFO (softwalltime.hook.pgwire.GETADDRINFO), read at each
# resolution: tests put a resolver that never answers there.
def _getaddrinfo() -> Any:
    return getattr(sys.modules[__name__.rpartition(".")[0]], "GETADDRINFO", socket.getaddrinfo)


class _Resolution:
    """One ``getaddrinfo(host, port)`` running in a daemon thread; ``result`` or ``error``
    once it is done. An event that stops waiting leaves it running, in ``STATE.resolving``."""

    def __init__(self, host: str, port: int) -> None:
        self.result = None  # type: Optional[List[Tuple[int, Any]]]
        self.error = None  # type: Optional[BaseException]
        self.thread = threading.Thread(
            target=self._run, args=(_getaddrinfo(), host, port), name="softwalltime-resolve"
        )
        self.thread.daemon = True
        self.thread.start()

    def _run(self, getaddrinfo: Any, host: str, port: int) -> None:
        try:
            infos = getaddrinfo(host, port, 0, socket.SOCK_STREAM)
            self.result = [(info[0], info[4]) for info in infos]
        except Exception as err:  # noqa: BLE001  (handed to the event that waits)
            self.error = err


def _numeric(host: str, port: int) -> Optional[List[Tuple[int, Any]]]:
    """The address of a numeric host (no resolver asked), else None."""
    try:
        infos = socket.getaddrinfo(host, port, 0, socket.SOCK_STREAM, 0, socket.AI_NUMERICHOST)
    except (socket.gaierror, UnicodeError):
        return None
    return [(info[0], info[4]) for info in infos]


def _resolve(host: str, port: int, deadline: float) -> List[Tuple[int, Any]]:
    """The addresses of ``host`` by ``deadline``: a numeric host at once; a name from the
    resolver, in a daemon thread this event waits on until the deadline (half of the time
    left when an earlier answer is kept, which is then used if it is late or fails).

    :raises DatabaseError: the resolver did not answer in time and no answer is kept
    :raises OSError: it failed (unknown name...) and no answer is kept
    """
    numeric = _numeric(host, port)
    if numeric:
        return numeric
    key = (host, port)
    known = STATE.addresses.get(key)
    resolution = STATE.resolving.get(key)
    if resolution is None:  # else: the one a silent resolver still holds, not another
        resolution = STATE.resolving[key] = _Resolution(host, port)
    wait = max(0.0, deadline - time.monotonic())
    resolution.thread.join(wait / 2 if known else wait)
    if resolution.thread.is_alive():
        if known:
            return known
        raise DatabaseError(
            f"timed out resolving {host} after {wait:.1f} s (the DNS server does not"
            " answer; a numeric host or a unix socket in the DSN needs none)"
        )
    del STATE.resolving[key]
    if resolution.result:
        STATE.addresses[key] = resolution.result
        return resolution.result
    if known:
        return known
    raise resolution.error or OSError(f"no address for {host}")


def _open_socket(host: str, port: int, deadline: float) -> Any:
    """A connected non-blocking socket to a unix socket directory or a TCP host.

    The addresses of a name (IPv6 and IPv4, say) share ``deadline`` as hosts do: a blackholed
    first address does not keep the next one from being tried.
    """
    targets = []  # type: List[Tuple[Any, Any]]
    if host.startswith("/"):
        targets.append((socket.AF_UNIX, os.path.join(host, f".s.PGSQL.{port}")))
    else:
        targets = _resolve(host, port, deadline)
    last = None  # type: Optional[BaseException]
    for index, (family, address) in enumerate(targets):
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setblocking(False)
        try:
            _connect_socket(sock, address, _share(time.monotonic(), deadline, len(targets) - index))
            if family != socket.AF_UNIX:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            return sock
        except OSError as err:
            sock.close()
            last = err
        except Timeout:
            sock.close()
            last = Timeout(f"timed out connecting to {_where(host, port)}")
    if isinstance(last, DatabaseError):
        raise last
    reason = getattr(last, "strerror", None) or last
    raise DatabaseError(f"cannot connect to {_where(host, port)}: {reason}")


def _connect_socket(sock: Any, address: Any, deadline: float) -> None:
    """Connect a non-blocking socket by ``deadline``.

    :raises OSError: refused, unreachable...
    :raises Timeout: not connected in time
    """
    code = sock.connect_ex(address)
    if code not in (0, errno.EINPROGRESS, errno.EAGAIN):
        raise OSError(code, os.strerror(code))
    if code:
        remaining = deadline - time.monotonic()
        if remaining <= 0 or not wait_ready(sock, False, remaining):
            raise Timeout("timed out connecting")
        code = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if code:
            raise OSError(code, os.strerror(code))


def _where(host: str, port: int) -> str:
    if host.startswith("/"):
        return f"socket {host}/.s.PGSQL.{port}"
    return f"{host}:{port}"
