"""The site file: a PBS site as its own PBS describes it (pure data, issue 46).

One JSON document (``"format": "softwalltime-site/1"``) holds what the scheduler model needs
of a site: its vnodes, its queues (execution and routing), the server's and queues' run
limits, the scheduler's sort and fairshare settings. ``softwalltime site export`` writes it
from ``pbsnodes -av``, ``qmgr -c 'print server'``, ``sched_config`` and ``resource_group``;
the bundled traces have their own in ``softwalltime/data/sites/``.

Values stay in PBS's own spelling where PBS has one (a limit is ``"[u:PBS_GENERIC=2]"``, a
walltime is seconds, ``mem`` is kilobytes): the modules that model a rule parse them
(:mod:`.replay.limits`, :mod:`.replay.nodes`, :mod:`.replay.fairshare`).

Every count a file chooses is capped (:data:`MAX_VNODES`, :data:`MAX_QUEUES`, ...): a file is
input, and a bad one is refused with the key that is wrong.
"""

from __future__ import annotations

import json
from typing import Any, Dict, NamedTuple, Optional, Tuple, Union

from .errors import ParseError

FORMAT = "softwalltime-site/1"
MAX_VNODES = 100_000
MAX_QUEUES = 1_000
MAX_RESOURCES = 256  # custom resources per vnode
MAX_GROUPS = 100_000  # resource_group entries
MAX_TEXT = 4096  # any one string
MAX_FILE_BYTES = 64 * 1024 * 1024

Value = Union[bool, int, str]


class Vnode(NamedTuple):
    """One vnode: ``resources_available`` (``ncpus``, ``mem`` in kB, ``ngpus``, and custom
    boolean or string resources by name), its ``host`` (a chunk fits on one host) and its
    ``queue`` attribute (the node is then only for that queue's jobs), if any."""

    name: str
    host: str
    ncpus: int
    mem_kb: int = 0
    ngpus: int = 0
    resources: Dict[str, Value] = {}
    queue: Optional[str] = None


class Queue(NamedTuple):
    """One queue: ``execution`` or ``route``; limits in PBS's spelling (None: unset)."""

    name: str
    kind: str = "execution"
    priority: int = 0
    enabled: bool = True
    started: bool = True
    walltime_min: Optional[int] = None  # resources_min.walltime, seconds
    walltime_max: Optional[int] = None  # resources_max.walltime, seconds
    destinations: Tuple[str, ...] = ()  # route_destinations, in order
    max_run: Optional[str] = None  # e.g. "[o:PBS_ALL=10],[u:PBS_GENERIC=2]"
    max_run_res: Dict[
        str, str
    ] = {}  # resource -> limit string, e.g. {"ncpus": "[u:PBS_GENERIC=8]"}
    default_place: Optional[str] = None
    """``resources_default.place`` (e.g. ``excl``: whole nodes), None: PBS's ``free``."""
    default_chunk: Dict[str, Value] = {}
    """``default_chunk.RES``: what each chunk of the queue's jobs asks for unless it says;
    a node pool as a ``Qlist``-style resource is ``{"Qlist": "q_1d"}`` (PBS's way to give
    queues overlapping pools: the node's ``queue`` attribute names one queue only)."""


class Scheduler(NamedTuple):
    """The server's and scheduler's sort and backfilling settings (PBS's defaults)."""

    job_sort_formula: Optional[str] = None
    backfill_depth: int = 1
    strict_ordering: bool = False
    by_queue: bool = True
    round_robin: bool = False
    opt_backfill_fuzzy: str = "low"
    resources: Tuple[str, ...] = ("ncpus", "mem", "arch", "host", "vnode", "aoe", "eoe")
    fair_share: bool = False
    fairshare_entity: str = "euser"
    fairshare_usage_res: str = "cput"
    fairshare_decay_time: int = 24 * 3600
    fairshare_decay_factor: float = 0.5
    fairshare_enforce_no_shares: bool = True  # PBS's default (parse.cpp:99)
    unknown_shares: int = 0  # the unknown group's shares (parse.cpp:117)
    resource_group: Tuple[Tuple[str, int, str, int], ...] = ()  # (name, id, parent, shares)


class Site(NamedTuple):
    name: str
    vnodes: Tuple[Vnode, ...]
    queues: Tuple[Queue, ...]
    default_queue: Optional[str] = None
    max_run: Optional[str] = None  # the server's limits, PBS's spelling
    max_run_res: Dict[str, str] = {}
    scheduler: Scheduler = Scheduler()
    source: str = ""  # where the file was made from (free text)

    @property
    def ncpus(self) -> int:
        return sum(v.ncpus for v in self.vnodes)

    def queue(self, name: str) -> Optional[Queue]:
        for q in self.queues:
            if q.name == name:
                return q
        return None


# ---------------------------------------------------------------------------------------
# JSON


def _text(v: Any, where: str) -> str:
    if not isinstance(v, str) or len(v) > MAX_TEXT:
        raise ParseError(f"site file: {where} must be a string of at most {MAX_TEXT} characters")
    return v


def _int(v: Any, where: str, low: int = 0) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < low or v > 2**53:
        raise ParseError(f"site file: {where} must be an integer >= {low}")
    return v


def _opt_int(v: Any, where: str) -> Optional[int]:
    return None if v is None else _int(v, where)


def _opt_text(v: Any, where: str) -> Optional[str]:
    return None if v is None else _text(v, where)


def _limits(v: Any, where: str) -> Dict[str, str]:
    if not isinstance(v, dict) or len(v) > MAX_RESOURCES:
        raise ParseError(f"site file: {where} must be an object of limit strings")
    return {_text(k, where): _text(x, f"{where}.{k}") for k, x in v.items()}


def _values(res: Any, where: str) -> Dict[str, Value]:
    """An object of resource values (boolean, integer or string), checked."""
    if not isinstance(res, dict) or len(res) > MAX_RESOURCES:
        raise ParseError(f"site file: {where} must be an object")
    for key, val in res.items():
        _text(key, where)
        if not isinstance(val, (bool, int, str)) or (isinstance(val, str) and len(val) > MAX_TEXT):
            raise ParseError(f"site file: {where}.{key} must be a boolean, integer or string")
    return dict(res)


def _vnode(d: Any, k: int) -> Vnode:
    where = f"vnodes[{k}]"
    if not isinstance(d, dict):
        raise ParseError(f"site file: {where} must be an object")
    res = _values(d.get("resources", {}), f"{where}.resources")
    name = _text(d.get("name"), f"{where}.name")
    return Vnode(
        name=name,
        host=_text(d.get("host", name), f"{where}.host"),
        ncpus=_int(d.get("ncpus"), f"{where}.ncpus"),
        mem_kb=_int(d.get("mem_kb", 0), f"{where}.mem_kb"),
        ngpus=_int(d.get("ngpus", 0), f"{where}.ngpus"),
        resources=res,
        queue=_opt_text(d.get("queue"), f"{where}.queue"),
    )


def _queue(d: Any, k: int) -> Queue:
    where = f"queues[{k}]"
    if not isinstance(d, dict):
        raise ParseError(f"site file: {where} must be an object")
    kind = d.get("kind", "execution")
    if kind not in ("execution", "route"):
        raise ParseError(f"site file: {where}.kind must be execution or route")
    dest = d.get("destinations", [])
    if not isinstance(dest, list) or len(dest) > MAX_QUEUES:
        raise ParseError(f"site file: {where}.destinations must be a list of queue names")
    return Queue(
        name=_text(d.get("name"), f"{where}.name"),
        kind=kind,
        priority=_int(d.get("priority", 0), f"{where}.priority", low=-(2**31)),
        enabled=bool(d.get("enabled", True)),
        started=bool(d.get("started", True)),
        walltime_min=_opt_int(d.get("walltime_min"), f"{where}.walltime_min"),
        walltime_max=_opt_int(d.get("walltime_max"), f"{where}.walltime_max"),
        destinations=tuple(_text(x, f"{where}.destinations") for x in dest),
        max_run=_opt_text(d.get("max_run"), f"{where}.max_run"),
        max_run_res=_limits(d.get("max_run_res", {}), f"{where}.max_run_res"),
        default_place=_opt_text(d.get("default_place"), f"{where}.default_place"),
        default_chunk=_values(d.get("default_chunk", {}), f"{where}.default_chunk"),
    )


def _scheduler(d: Any) -> Scheduler:
    if d is None:
        return Scheduler()
    if not isinstance(d, dict):
        raise ParseError("site file: scheduler must be an object")
    known = Scheduler._fields
    extra = sorted(set(d) - set(known))
    if extra:
        raise ParseError(f"site file: scheduler has unknown keys: {', '.join(extra[:5])}")
    base = Scheduler()._asdict()
    for key, val in d.items():
        if key == "resources":
            if not isinstance(val, list):
                raise ParseError("site file: scheduler.resources must be a list of names")
            val = tuple(_text(x, "scheduler.resources") for x in val[:MAX_RESOURCES])
        elif key == "resource_group":
            if not isinstance(val, list) or len(val) > MAX_GROUPS:
                raise ParseError("site file: scheduler.resource_group must be a list")
            val = tuple(
                (_text(g[0], "resource_group"), _int(g[1], "resource_group id", low=-(2**31)),
                 _text(g[2], "resource_group parent"), _int(g[3], "resource_group shares"))
                for g in val
            )  # fmt: skip
        else:
            val = _scalar(val, base[key], f"scheduler.{key}")
        base[key] = val
    return Scheduler(**base)


def _scalar(val: Any, default: Any, where: str) -> Any:
    """``val`` if of the type of the setting's ``default`` (None: an optional string)."""
    if isinstance(default, bool):
        if not isinstance(val, bool):
            raise ParseError(f"site file: {where} must be true or false")
        return val
    if isinstance(default, int):
        return _int(val, where)
    if isinstance(default, float):
        if isinstance(val, bool) or not isinstance(val, (int, float)):
            raise ParseError(f"site file: {where} must be a number")
        return float(val)
    return None if val is None else _text(val, where)


def from_json(doc: Any) -> Site:
    """A :class:`Site` from a parsed site file; :class:`ParseError` names the bad key."""
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise ParseError(f'site file: not a {FORMAT} document (its "format" key)')
    vnodes, queues = doc.get("vnodes"), doc.get("queues", [])
    if not isinstance(vnodes, list) or not vnodes or len(vnodes) > MAX_VNODES:
        raise ParseError(f"site file: vnodes must be a list of 1 to {MAX_VNODES} vnodes")
    if not isinstance(queues, list) or len(queues) > MAX_QUEUES:
        raise ParseError(f"site file: queues must be a list of at most {MAX_QUEUES} queues")
    return Site(
        name=_text(doc.get("name", "site"), "name"),
        vnodes=tuple(_vnode(v, k) for k, v in enumerate(vnodes)),
        queues=tuple(_queue(q, k) for k, q in enumerate(queues)),
        default_queue=_opt_text(doc.get("default_queue"), "default_queue"),
        max_run=_opt_text(doc.get("max_run"), "max_run"),
        max_run_res=_limits(doc.get("max_run_res", {}), "max_run_res"),
        scheduler=_scheduler(doc.get("scheduler")),
        source=_text(doc.get("source", ""), "source"),
    )


def to_json(site: Site) -> Dict[str, Any]:
    """The site file of ``site`` (:func:`from_json` reads it back equal)."""
    sched = site.scheduler._asdict()
    sched["resources"] = list(sched["resources"])
    sched["resource_group"] = [list(g) for g in sched["resource_group"]]
    return {
        "format": FORMAT,
        "name": site.name,
        "source": site.source,
        "default_queue": site.default_queue,
        "max_run": site.max_run,
        "max_run_res": dict(site.max_run_res),
        "scheduler": sched,
        "queues": [dict(q._asdict(), destinations=list(q.destinations)) for q in site.queues],
        "vnodes": [v._asdict() for v in site.vnodes],
    }


def load(path: str) -> Site:
    """Read a site file; :class:`ParseError` (file and key) when it is not one."""
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_FILE_BYTES + 1)
    except OSError as e:
        raise ParseError(f"{path}: {e.strerror}") from None
    if len(raw) > MAX_FILE_BYTES:
        raise ParseError(f"{path}: larger than {MAX_FILE_BYTES} bytes")
    try:
        doc = json.loads(raw)
    except ValueError as e:
        raise ParseError(f"{path}: not JSON ({e})") from None
    try:
        return from_json(doc)
    except ParseError as e:
        raise ParseError(f"{path}: {e}") from None


def dump(site: Site) -> str:
    return json.dumps(to_json(site), indent=1, sort_keys=True) + "\n"
