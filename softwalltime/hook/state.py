"""What the hook keeps between events, in one object.

pbs_server keeps imported modules between hook events until its interpreter restarts (then
everything here starts empty again, which is always correct: it is all a cache). Each field
is a cache of something the hook could compute or read again; :meth:`HookState.reset`
forgets all of it (tests, and after a failure that leaves the connection in doubt).

Hook path: Python 3.6+ syntax, standard library only.
"""

from collections import OrderedDict
from typing import Any, Dict, List, Optional, Tuple


class HookState:
    """The hook's memory between events; one instance, :data:`STATE`.

    * ``conn``, ``conn_key``: the cached database connection and what it was opened with
      (DSN, timeouts); another key means another connection.
    * ``counter``: whether the database has the history change counter of migration 0006
      (None: not asked yet on this connection).
    * ``version``: the counter's value the kept lookups and decisions were read at; they are
      used only while the counter still reads this value.
    * ``event``, ``deadline``, ``recheck_s``: the event in progress (an identity), the
      ``time.monotonic()`` by which all its reads end and how long a read of the counter is
      trusted (see ``lookup.event``); None, None, 0 between events and outside the hook.
    * ``version_read``: ``(event, monotonic time, connection, value)`` of the last read of
      the counter, so that one event reads it once whatever it looks up, and the events of
      the next ``recheck_s`` not at all.
    * ``lookups``: ``(sql, params) -> (monotonic time, rows)``, least recently used first.
    * ``decisions``: ``(settings identity, job) -> (monotonic time, decision, settings)``.
    * ``calibration``: the site table of predictor ``calibrated``, when read and from where.
    * ``learned``: the decisions of predictor ``learned``'s table, likewise.
    * ``fetch``: the history reader made last (it is remade when the settings change).
    * ``settings``: the hook's parsed config and the identity of the file it came from.
    * ``log_route``: where the ``softwalltime`` logger was routed last (``pbs.logmsg``).
    * ``addresses``: ``(host, port) -> [(family, address), ...]``, the last answer of the
      name resolver for a database host, used when it does not answer in time.
    * ``resolving``: ``(host, port) ->`` the resolution in progress (pgwire's daemon
      thread), which a later event waits on instead of starting another while the resolver
      is silent: at most one thread per host.
    """

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """Forget everything (closing the cached connection)."""
        conn = getattr(self, "conn", None)
        self.conn: Any = None
        self.conn_key: Optional[Tuple[Any, ...]] = None
        self.counter: Optional[bool] = None
        self.event: Any = None
        self.deadline: Optional[float] = None
        self.recheck_s = 0.0
        self.version_read: Optional[Tuple[Any, float, Any, Optional[int]]] = None
        self.forget_lookups()
        self.calibration: Dict[str, Any] = {"table": None, "at": 0.0, "dsn": None}
        self.learned: Dict[str, Any] = {"table": None, "at": 0.0, "dsn": None}
        self.fetch: Any = None
        self.settings: Dict[str, Any] = {}
        self.log_route: List[Any] = [None, None, None]
        self.addresses: Dict[Tuple[str, int], List[Tuple[int, Any]]] = {}
        self.resolving: Dict[Tuple[str, int], Any] = {}
        if conn is not None:
            conn.close()  # pgwire's close never raises

    def forget_connection(self) -> None:
        """Close and forget the cached connection; what was read stays valid (it is checked
        against the history's change counter, which lives in the database, not the
        connection)."""
        conn = self.conn
        self.conn = None
        self.conn_key = None
        self.counter = None
        self.version_read = None
        if conn is not None:
            conn.close()

    def forget_lookups(self) -> None:
        """Forget the kept lookups and decisions."""
        self.version: Optional[int] = None
        self.lookups: OrderedDict[Tuple[str, Tuple[Any, ...]], Tuple[float, Any]] = OrderedDict()
        self.decisions: OrderedDict[Tuple[Any, ...], Tuple[float, Any, Any]] = OrderedDict()


STATE = HookState()
