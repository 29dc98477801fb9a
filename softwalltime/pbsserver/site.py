"""``softwalltime site export``: a PBS site's site file, read from its own PBS (issue 46).

Four sources, each read by a pure parser here (the tests feed them outputs captured on the
real OpenPBS 23.06 server):

- ``pbsnodes -a -F json`` (:func:`parse_pbsnodes`): the vnodes, their
  ``resources_available`` (``ncpus``, ``mem``, ``ngpus``, ``host`` and every other resource
  as a custom one: ``arch`` too, since chunks may ask for it) and their ``queue``;
- ``qmgr -c 'print server'`` (:func:`parse_qmgr_print`): the queues (type, priority,
  enabled, started, ``resources_min``/``resources_max.walltime``, ``route_destinations``,
  ``max_run``, ``max_run_res.*``, ``resources_default.place``, ``default_chunk.*``: a
  ``Qlist``-style node pool), the server's ``default_queue``, ``backfill_depth``,
  ``max_run``, ``max_run_res.*`` and, on older servers, ``job_sort_formula``;
  ``qmgr -c 'print sched'`` (same parser): ``job_sort_formula`` and ``opt_backfill_fuzzy``
  (23.06 keeps both on the scheduler) and ``sched_priv``, where ``sched_config`` is;
- ``sched_config`` (:func:`parse_sched_config`): ``strict_ordering``, ``by_queue``,
  ``round_robin``, ``fair_share``, the ``fairshare_*`` lines, ``resources``, and
  ``opt_backfill_fuzzy`` as older servers had it;
- ``resource_group`` (:func:`parse_resource_group`): ``name id parent shares`` lines.

A line a parser does not understand is an error naming the file (or command) and the line:
an export that silently dropped a queue or a limit would describe another site. Counts are
capped by the site file's caps (:data:`..site_file.MAX_VNODES` ...).

A sched_config value may carry a prime-time option (``True ALL``, ``True prime``,
``False non_prime``): the export keeps the value for ``all`` (any case), else for
``non_prime`` (PBS's default holidays file makes most hours non-prime), and says so in
:attr:`Export.notes` when prime time has another value.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from typing import Any, Dict, List, NamedTuple, Optional, Tuple

from .. import site_file as sf
from ..errors import ParseError
from ..units import parse_duration, parse_size
from .commands import Pbs

# One command's output or one file: pbsnodes -F json prints about 1 kB per vnode, so this
# holds site_file.MAX_VNODES (100,000) of them; sched_config and qmgr's are far smaller.
MAX_TEXT_BYTES = 128 * 1024 * 1024
PRIME_OPTIONS = ("all", "prime", "non_prime", "none")
_BOOL = {"true": True, "false": False, "1": True, "0": False, "t": True, "f": False}
_STD_NODE = ("ncpus", "mem", "ngpus", "host", "vnode")


class Export(NamedTuple):
    """A site read from PBS, and what the reader says about it (one line each)."""

    site: sf.Site
    notes: List[str]


def _cap(text: str, where: str) -> str:
    if len(text) > MAX_TEXT_BYTES:
        raise ParseError(f"{where}: larger than {MAX_TEXT_BYTES} bytes")
    return text


def _bool(value: str, where: str) -> bool:
    try:
        return _BOOL[value.strip().lower()]
    except KeyError:
        raise ParseError(f"{where}: not a boolean: {value!r}") from None


# ---------------------------------------------------------------------------------------
# pbsnodes -a -F json


def _node_value(value: Any) -> sf.Value:
    if isinstance(value, bool) or isinstance(value, int):
        return value
    text = str(value)
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    return text[: sf.MAX_TEXT]


def _int_of(value: Any, where: str) -> int:
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise ParseError(f"{where}: not an integer: {value!r}") from None
    if number < 0:
        raise ParseError(f"{where}: negative: {number}")
    return number


def _vnode(name: str, node: Any, where: str) -> sf.Vnode:
    if not isinstance(node, dict):
        raise ParseError(f"{where}: nodes.{name} is not an object")
    avail = node.get("resources_available") or {}
    if not isinstance(avail, dict) or len(avail) > sf.MAX_RESOURCES:
        raise ParseError(f"{where}: nodes.{name}.resources_available is not a small object")
    here = f"{where}: nodes.{name}.resources_available"
    mem = avail.get("mem")
    try:
        mem_kb = parse_size(str(mem)) // 1024 if mem is not None else 0
    except ParseError:
        raise ParseError(f"{here}.mem: not a size: {mem!r}") from None
    queue = node.get("queue")
    return sf.Vnode(
        name=name,
        host=str(avail.get("host") or name),
        ncpus=_int_of(avail.get("ncpus", 0), f"{here}.ncpus"),
        mem_kb=mem_kb,
        ngpus=_int_of(avail.get("ngpus", 0), f"{here}.ngpus"),
        resources={k: _node_value(v) for k, v in avail.items() if k not in _STD_NODE},
        queue=str(queue) if queue else None,
    )


def parse_pbsnodes(text: str, where: str = "pbsnodes -a -F json") -> Tuple[str, List[sf.Vnode]]:
    """The server's name and its vnodes, in name order.

    :raises ParseError: not pbsnodes' JSON, a bad value (its key), too many vnodes
    """
    try:
        doc = json.loads(_cap(text, where), strict=False)
    except ValueError as err:
        raise ParseError(f"{where}: not JSON: {err}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("nodes", {}), dict):
        raise ParseError(f"{where}: expected an object with a 'nodes' object")
    nodes = doc.get("nodes", {})
    if len(nodes) > sf.MAX_VNODES:
        raise ParseError(f"{where}: {len(nodes)} vnodes, more than {sf.MAX_VNODES}")
    server = str(doc.get("pbs_server") or "pbs")
    return server, [_vnode(name, nodes[name], where) for name in sorted(nodes)]


# ---------------------------------------------------------------------------------------
# qmgr -c 'print server' / 'print sched'

_SET = re.compile(r"^set\s+(?P<rest>.*?)\s+(?P<op>\+?=)\s*(?P<value>.*)$")
_OBJECTS = ("server", "sched", "queue", "resource", "node", "hook", "pbshook")


class QmgrPrint(NamedTuple):
    """What ``qmgr print`` set, by object: ``(kind, name) -> {attribute: value}`` (a
    ``+=`` line appended after a comma), and the objects in the order they were created."""

    attrs: Dict[Tuple[str, str], Dict[str, str]]
    created: List[Tuple[str, str]]


def _unquote(value: str, where: str) -> str:
    value = value.strip()
    if value[:1] in ("'", '"'):
        try:
            words = shlex.split(value)
        except ValueError:
            raise ParseError(f"{where}: unbalanced quotes: {value}") from None
        if len(words) != 1:
            raise ParseError(f"{where}: more than one quoted value: {value}")
        return words[0]
    return value


def _target(words: List[str], where: str) -> Tuple[str, str, str]:
    """``(kind, name, attribute)`` of a ``set`` line's words before the ``=``."""
    if not words or words[0] not in _OBJECTS:
        raise ParseError(f"{where}: not a qmgr object: {' '.join(words[:1])!r}")
    kind = words[0]
    if kind == "server" and len(words) == 2:
        return kind, "", words[1]
    if kind == "sched" and len(words) in (2, 3):
        return kind, words[1] if len(words) == 3 else "default", words[-1]
    if kind != "server" and len(words) == 3:
        return kind, words[1], words[2]
    raise ParseError(f"{where}: not 'set OBJECT [NAME] ATTRIBUTE = VALUE'")


def parse_qmgr_print(text: str, where: str = "qmgr print") -> QmgrPrint:
    """Every ``create`` and ``set`` line of ``qmgr -c 'print server'`` (or ``sched``).

    :raises ParseError: a line that is neither (its number), a bad quote, too many queues
    """
    attrs: Dict[Tuple[str, str], Dict[str, str]] = {}
    created: List[Tuple[str, str]] = []
    for number, line in enumerate(_cap(text, where).splitlines(), 1):
        here = f"{where}:{number}"
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        words = line.split()
        if words[0] == "create" and len(words) >= 3 and words[1] in _OBJECTS:
            created.append((words[1], words[2]))
            if len(created) > sf.MAX_QUEUES + sf.MAX_RESOURCES + 16:
                raise ParseError(f"{here}: more objects than a site file holds")
            continue
        m = _SET.match(line)
        if m is None:
            raise ParseError(f"{here}: not a qmgr create or set line: {line[:80]}")
        kind, name, attr = _target(m.group("rest").split(), here)
        value = _unquote(m.group("value"), here)
        table = attrs.setdefault((kind, name), {})
        if m.group("op") == "+=" and attr in table:
            table[attr] = f"{table[attr]},{value}"
        else:
            table[attr] = value
    return QmgrPrint(attrs, created)


def _duration(attrs: Dict[str, str], key: str, where: str) -> Optional[int]:
    if key not in attrs:
        return None
    try:
        return parse_duration(attrs[key])
    except ParseError:
        raise ParseError(f"{where}: {key}: not a duration: {attrs[key]!r}") from None


def _limits(attrs: Dict[str, str]) -> Dict[str, str]:
    return {k.split(".", 1)[1]: v for k, v in attrs.items() if k.startswith("max_run_res.")}


def _queue(name: str, attrs: Dict[str, str], where: str) -> sf.Queue:
    here = f"{where}: queue {name}"
    qtype = attrs.get("queue_type", "Execution").lower()
    if qtype not in ("execution", "route"):
        raise ParseError(f"{here}: queue_type {attrs.get('queue_type')!r}")
    dest = attrs.get("route_destinations", "")
    return sf.Queue(
        name=name,
        kind=qtype,
        priority=int(_int_signed(attrs.get("Priority", attrs.get("priority", "0")), here)),
        enabled=_bool(attrs.get("enabled", "True"), f"{here}: enabled"),
        started=_bool(attrs.get("started", "True"), f"{here}: started"),
        walltime_min=_duration(attrs, "resources_min.walltime", here),
        walltime_max=_duration(attrs, "resources_max.walltime", here),
        destinations=tuple(d.strip() for d in dest.split(",") if d.strip()),
        max_run=attrs.get("max_run"),
        max_run_res=_limits(attrs),
        default_place=attrs.get("resources_default.place"),
        default_chunk={
            k.split(".", 1)[1]: _node_value(v)
            for k, v in attrs.items()
            if k.startswith("default_chunk.")
        },
    )


def _int_signed(value: str, where: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise ParseError(f"{where}: not an integer: {value!r}") from None


def queues_of(printed: QmgrPrint, where: str = "qmgr print server") -> List[sf.Queue]:
    """The queues ``print server`` created, in its order.

    :raises ParseError: a bad queue attribute (the queue and attribute)
    """
    names = [name for kind, name in printed.created if kind == "queue"]
    if len(names) > sf.MAX_QUEUES:
        raise ParseError(f"{where}: {len(names)} queues, more than {sf.MAX_QUEUES}")
    return [_queue(n, printed.attrs.get(("queue", n), {}), where) for n in names]


# ---------------------------------------------------------------------------------------
# sched_config and resource_group

_CONFIG_BOOLS = ("strict_ordering", "by_queue", "round_robin", "fair_share")
_CONFIG_KEYS = _CONFIG_BOOLS + (
    "fairshare_entity",
    "fairshare_usage_res",
    "fairshare_decay_time",
    "fairshare_decay_factor",
    "fairshare_enforce_no_shares",
    "unknown_shares",
    "resources",
    "opt_backfill_fuzzy",
)


class ConfigLine(NamedTuple):
    value: str
    prime: str  # all, prime, non_prime, none ("" when the line has no option)
    line: int


def _config_line(line: str, here: str) -> Optional[Tuple[str, ConfigLine]]:
    text = line.strip()
    if not text or text.startswith("#"):
        return None
    key, sep, rest = text.partition(":")
    if not sep or not key.strip() or " " in key.strip():
        raise ParseError(f"{here}: not a 'key: value' line: {text[:80]}")
    rest = rest.strip()
    if rest.startswith('"'):
        end = rest.find('"', 1)
        if end < 0:
            raise ParseError(f"{here}: unbalanced quote: {text[:80]}")
        value, option = rest[1:end], rest[end + 1 :].strip()
    else:
        words = rest.split()
        value, option = (words[0] if words else ""), " ".join(words[1:])
    option = option.split()[0].lower() if option.split() else ""
    if option and option not in PRIME_OPTIONS:
        option = ""  # PBS reads words after the value only as these options
    return key.strip(), ConfigLine(value.strip(), option, 0)


def parse_sched_config(text: str, where: str = "sched_config") -> Dict[str, List[ConfigLine]]:
    """Every ``key: value [prime option]`` line, by key in file order.

    :raises ParseError: a line that is not one (its number)
    """
    out: Dict[str, List[ConfigLine]] = {}
    for number, line in enumerate(_cap(text, where).splitlines(), 1):
        found = _config_line(line, f"{where}:{number}")
        if found is not None:
            key, entry = found
            out.setdefault(key, []).append(entry._replace(line=number))
    return out


def _pick(lines: List[ConfigLine], key: str, notes: List[str]) -> ConfigLine:
    """The line that holds outside prime time: ``all`` (or no option), else
    ``non_prime``; a note when prime time has another value."""
    chosen = None
    for option in ("all", "", "non_prime"):
        found = [ln for ln in lines if ln.prime == option]
        if found:
            chosen = found[-1]
            break
    chosen = chosen or lines[-1]
    prime = [ln for ln in lines if ln.prime == "prime"]
    if prime and prime[-1].value.lower() != chosen.value.lower():
        notes.append(
            f"sched_config: {key} is {prime[-1].value} in prime time, {chosen.value} outside it;"
            f" the site file has {chosen.value}"
        )
    return chosen


def scheduler_of(
    config: Dict[str, List[ConfigLine]], where: str = "sched_config"
) -> Tuple[Dict[str, Any], List[str]]:
    """The :class:`..site_file.Scheduler` fields sched_config sets, and notes.

    :raises ParseError: a bad value (file:line and key)
    """
    notes: List[str] = []
    out: Dict[str, Any] = {}
    for key in _CONFIG_KEYS:
        if key not in config:
            continue
        entry = _pick(config[key], key, notes)
        here = f"{where}:{entry.line}: {key}"
        out[key] = _config_value(key, entry.value, here)
    return out, notes


def _config_value(key: str, value: str, here: str) -> Any:
    if key in _CONFIG_BOOLS or key == "fairshare_enforce_no_shares":
        return _bool(value, here)
    if key == "unknown_shares":
        if not value.isdigit() or int(value) > 2**31 - 1:
            raise ParseError(f"{here}: not a whole number of shares: {value!r}")
        return int(value)
    if key == "fairshare_decay_time":
        try:
            return parse_duration(value)
        except ParseError:
            raise ParseError(f"{here}: not a duration: {value!r}") from None
    if key == "fairshare_decay_factor":
        try:
            factor = float(value)
        except ValueError:
            raise ParseError(f"{here}: not a number: {value!r}") from None
        if not 0 < factor < 1:
            raise ParseError(f"{here}: must be between 0 and 1: {value}")
        return factor
    if key == "resources":
        return tuple(r.strip() for r in value.split(",") if r.strip())[: sf.MAX_RESOURCES]
    return value


def parse_resource_group(
    text: str, where: str = "resource_group"
) -> Tuple[Tuple[str, int, str, int], ...]:
    """``name id parent shares`` per line (``#`` comments and blank lines aside).

    :raises ParseError: a line of another shape or a non-integer id/shares (its number),
        too many entries
    """
    out = []
    for number, line in enumerate(_cap(text, where).splitlines(), 1):
        words = line.split("#", 1)[0].split()
        if not words:
            continue
        here = f"{where}:{number}"
        if len(words) != 4:
            raise ParseError(f"{here}: not 'name id parent shares': {line.strip()[:80]}")
        name, ident, parent, shares = words
        try:
            entry = (name, int(ident), parent, int(shares))
        except ValueError:
            raise ParseError(f"{here}: id and shares must be integers: {line.strip()}") from None
        if entry[3] < 0:
            raise ParseError(f"{here}: negative shares")
        out.append(entry)
        if len(out) > sf.MAX_GROUPS:
            raise ParseError(f"{here}: more than {sf.MAX_GROUPS} entries")
    return tuple(out)


# ---------------------------------------------------------------------------------------
# The site


class Sources(NamedTuple):
    """The four texts an export reads (what :func:`gather` fetches, or a test's captures);
    ``print_sched`` is ``qmgr -c 'print sched'``, ``resource_group`` None when absent."""

    pbsnodes: str
    print_server: str
    print_sched: str
    sched_config: str
    resource_group: Optional[str]
    sched_config_path: str = "sched_config"
    resource_group_path: str = "resource_group"


def _server_scheduler(server: Dict[str, str], sched: Dict[str, str]) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    formula = sched.get("job_sort_formula") or server.get("job_sort_formula")
    if formula:
        out["job_sort_formula"] = formula
    if "backfill_depth" in server:
        out["backfill_depth"] = _int_signed(server["backfill_depth"], "server backfill_depth")
    if "opt_backfill_fuzzy" in sched:
        out["opt_backfill_fuzzy"] = sched["opt_backfill_fuzzy"]
    return out


def site_of(src: Sources) -> Export:
    """The site file of four captured texts (pure).

    :raises ParseError: any of them is malformed (which, where)
    """
    name, vnodes = parse_pbsnodes(src.pbsnodes)
    printed = parse_qmgr_print(src.print_server, "qmgr print server")
    sched_printed = parse_qmgr_print(src.print_sched, "qmgr print sched")
    server = printed.attrs.get(("server", ""), {})
    sched = sched_printed.attrs.get(("sched", "default"), {})
    fields, notes = scheduler_of(parse_sched_config(src.sched_config, src.sched_config_path),
                                 src.sched_config_path)  # fmt: skip
    fields.update(_server_scheduler(server, sched))
    if src.resource_group is not None:
        fields["resource_group"] = parse_resource_group(src.resource_group, src.resource_group_path)
    site = sf.Site(
        name=name,
        vnodes=tuple(vnodes),
        queues=tuple(queues_of(printed)),
        default_queue=server.get("default_queue"),
        max_run=server.get("max_run"),
        max_run_res=_limits(server),
        scheduler=sf.Scheduler(**fields),
        source=f"softwalltime site export of {name}",
    )
    return Export(site, notes)


def _read(path: str, required: bool) -> Optional[str]:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return _cap(fh.read(MAX_TEXT_BYTES + 1), path)
    except FileNotFoundError:
        if required:
            raise ParseError(f"{path}: no such file") from None
        return None
    except OSError as err:
        raise ParseError(f"{path}: {err.strerror}") from None


def gather(pbs: Pbs) -> Export:
    """Read the live site: ``pbsnodes``, ``qmgr`` and the scheduler's files.

    ``sched_config`` and ``resource_group`` are in the scheduler's ``sched_priv`` (its
    attribute, else ``PBS_HOME/sched_priv``, where ``policy apply`` edits it).

    :raises PbsError: a command failed
    :raises ParseError: an output or file is malformed
    """
    nodes = pbs.check("pbsnodes", "-a", "-F", "json")
    server = pbs.check("qmgr", "-c", "print server")
    sched = pbs.check("qmgr", "-c", "print sched")
    printed = parse_qmgr_print(sched, "qmgr print sched").attrs.get(("sched", "default"), {})
    priv = printed.get("sched_priv") or os.path.join(pbs.home, "sched_priv")
    config_path = os.path.join(priv, "sched_config")
    group_path = os.path.join(priv, "resource_group")
    config = _read(config_path, required=True) or ""
    groups = _read(group_path, required=False)
    return site_of(Sources(nodes, server, sched, config, groups, config_path, group_path))
