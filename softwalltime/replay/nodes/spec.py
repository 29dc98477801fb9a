"""A job's resource request as PBS reads it: select chunks and place (pure, issue 46).

- ``Resource_List.select`` (:func:`parse_select`): ``N:res=value:...`` chunks joined by
  ``+``; ``N`` defaults to 1 (the scheduler's ``parse_selspec``, node_info.cpp:3672), a chunk
  without ``ncpus`` gets the server's ``default_chunk.ncpus = 1`` (PBS's default server
  configuration; ``qmgr -c 'print server'`` on the test server). ``mem`` is a PBS size:
  a number with ``b``, ``w`` (8-byte words), ``kb``, ``mb``, ``gb``, ``tb`` or ``pb``, no
  suffix being bytes (``to_size``, attr_fn_size.c:363-430), turned into kB rounding bytes up
  (``get_kilobytes_from_attr``, attr_fn_size.c:496-512). ``True``/``False`` values are
  booleans, whole numbers integers, anything else a string.
- ``place`` (:func:`parse_place`): ``free``, ``pack``, ``scatter`` or ``vscatter`` (at most
  one; none: ``free``), with ``excl``, ``exclhost`` (implies ``excl``) or ``shared``
  (``parse_placespec``, node_info.cpp:3607-3646). ``group=`` is refused: placement sets are
  not modelled.
- The legacy ``nodes=`` spec (:func:`parse_nodes`), as the server converts it
  (``cvt_nodespec_to_select``, node_manager.c:5505-5770): each ``+`` part ``N:prop:ppn=P``
  becomes ``N:ncpus=P*C`` (``cpp=C``/``ncpus=C``, default 1) with ``prop=True`` per property,
  or ``host=prop`` when the property names a vnode (node_manager.c:5717-5737); a ``#mod``
  after the spec is added to every part (``mod_spec``, node_manager.c:5545-5579) except
  ``#excl`` and ``#shared``, which make the place ``scatter:excl`` or ``scatter:share``,
  else ``scatter`` (svr_jobfunc.c:1811-1817). A property must start with a letter or digit
  (``property``, node_manager.c:5265-5269): Torque's exclusions (``^node``) are refused, as
  PBS refuses them.

Counts are capped (:data:`MAX_CHUNKS`, :data:`MAX_PARTS`): a spec is input.
"""

from __future__ import annotations

import re
from typing import AbstractSet, Dict, NamedTuple, Tuple, Union

MAX_CHUNKS = 100_000  # chunks in one request (the sum of the counts)
MAX_PARTS = 256  # "+"-joined parts of one select or nodes spec
MAX_SPEC = 4096  # characters of one spec
MAX_AMOUNT = 2**53  # any number in a spec

Value = Union[bool, int, str]

FREE, PACK, SCATTER, VSCATTER = "free", "pack", "scatter", "vscatter"


class Chunk(NamedTuple):
    """``n`` chunks of ``ncpus``, ``mem_kb``, ``ngpus`` and other resources (name, value)
    each. ``mpiprocs`` and ``ompthreads`` are not scheduled (no vnode has them)."""

    n: int
    ncpus: int = 1
    mem_kb: int = 0
    ngpus: int = 0
    other: Tuple[Tuple[str, Value], ...] = ()


class Place(NamedTuple):
    arrangement: str = FREE  # free, pack, scatter or vscatter
    excl: bool = False  # the job's vnodes are its own (exclhost: its hosts')
    exclhost: bool = False
    share: bool = False


class Request(NamedTuple):
    chunks: Tuple[Chunk, ...]
    place: Place

    @property
    def ncpus(self) -> int:
        return sum(c.n * c.ncpus for c in self.chunks)

    @property
    def total_chunks(self) -> int:
        return sum(c.n for c in self.chunks)


_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]*$")
_SIZE = re.compile(r"^(\d+)(?:([kmgtp]?)([bw]?))?$", re.IGNORECASE)
_SHIFT = {"": 0, "k": 10, "m": 20, "g": 30, "t": 40, "p": 50}
_SKIPPED = frozenset({"mpiprocs", "ompthreads"})


def parse_size_kb(text: str) -> int:
    """A PBS size in kB: bytes rounded up, a suffixed size shifted (module docstring).

    :raises ValueError: not a size
    """
    m = _SIZE.match(text.strip())
    if m is None:
        raise ValueError(f"size {text!r}: expected a number with b, w, kb, mb, gb, tb or pb")
    num, prefix, unit = int(m.group(1)), m.group(2).lower(), m.group(3).lower()
    if num > MAX_AMOUNT:
        raise ValueError(f"size {text!r}: more than {MAX_AMOUNT}")
    if unit == "w":
        num *= 8
    shift = _SHIFT[prefix]
    return (num + 1023) >> 10 if shift == 0 else num << (shift - 10)


def _number(text: str, what: str, spec: str) -> int:
    if not text.isdigit() or int(text) > MAX_AMOUNT:
        raise ValueError(f"select {spec!r}: {what} {text!r} is not a whole number")
    return int(text)


def _value(text: str) -> Value:
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    if text.isdigit() and int(text) <= MAX_AMOUNT:
        return int(text)
    return text


def _chunk(part: str, spec: str) -> Chunk:
    count_text, sep, rest = part.partition(":")
    if count_text.isdigit():
        count = _number(count_text, "chunk count", spec)
        items = rest.split(":") if sep else []
    else:
        count, items = 1, part.split(":")
    if count < 1:
        raise ValueError(f"select {spec!r}: a chunk count must be at least 1")
    fields: Dict[str, str] = {}
    for item in items:
        name, eq, val = item.partition("=")
        if not eq or not _NAME.match(name) or not val:
            raise ValueError(f"select {spec!r}: {item!r} is not resource=value")
        if name in fields:
            raise ValueError(f"select {spec!r}: {name} given twice in one chunk")
        fields[name] = val
    ncpus = _number(fields.pop("ncpus", "1"), "ncpus", spec)
    mem_kb = parse_size_kb(fields.pop("mem")) if "mem" in fields else 0
    ngpus = _number(fields.pop("ngpus", "0"), "ngpus", spec)
    other = tuple(sorted((k, _value(v)) for k, v in fields.items() if k not in _SKIPPED))
    return Chunk(count, ncpus, mem_kb, ngpus, other)


def parse_select(spec: str) -> Tuple[Chunk, ...]:
    """The chunks of a ``select`` spec (module docstring).

    :raises ValueError: naming the spec: empty, malformed, or beyond the caps
    """
    text = spec.strip()
    if text.startswith("select="):
        text = text[len("select=") :]
    if not text or len(text) > MAX_SPEC:
        raise ValueError(f"select {spec[:80]!r}: empty or longer than {MAX_SPEC} characters")
    parts = text.split("+")
    if len(parts) > MAX_PARTS:
        raise ValueError(f"select {spec[:80]!r}: more than {MAX_PARTS} parts")
    chunks = tuple(_chunk(p, spec) for p in parts)
    if sum(c.n for c in chunks) > MAX_CHUNKS:
        raise ValueError(f"select {spec[:80]!r}: more than {MAX_CHUNKS} chunks")
    return chunks


def parse_place(spec: str) -> Place:
    """A ``place`` spec (``""``: PBS's default, ``free``).

    :raises ValueError: an unknown word, two arrangements, or ``group=``
    """
    arrangement, excl, exclhost, share = "", False, False, False
    for word in (w for w in spec.strip().split(":") if w or spec.strip()):
        if word in (FREE, PACK, SCATTER, VSCATTER):
            if arrangement:
                raise ValueError(f"place {spec!r}: {arrangement} and {word} together")
            arrangement = word
        elif word == "excl":
            excl = True
        elif word == "exclhost":
            excl = exclhost = True
        elif word == "shared":
            share = True
        elif word.startswith("group="):
            raise ValueError(f"place {spec!r}: group= (placement sets) is not modelled")
        else:
            raise ValueError(f"place {spec!r}: unknown word {word!r}")
    return Place(arrangement or FREE, excl, exclhost, share)


def _nodes_part(part: str, mods: Tuple[str, ...], vnodes: AbstractSet[str], spec: str) -> str:
    count_text, sep, rest = part.partition(":")
    if count_text.isdigit():
        count, words = int(count_text), (rest.split(":") if sep else [])
    else:
        count, words = 1, part.split(":")
    if count < 1 or count > MAX_CHUNKS:
        raise ValueError(f"nodes {spec!r}: node count {count_text!r} out of range")
    ppn, cpp, props = 1, 1, []
    for word in [w for w in words if w] + list(mods):
        name, eq, val = word.partition("=")
        if not name or not name[0].isalnum():
            raise ValueError(f"nodes {spec!r}: {word!r} is not a property (PBS refuses it)")
        if eq and name.lower() == "ppn":
            ppn = _number(val, "ppn", spec)
        elif eq and name.lower() in ("cpp", "ncpus"):
            cpp = _number(val, "cpp", spec)
        elif eq:
            raise ValueError(f"nodes {spec!r}: unknown {name}= (PBS refuses it)")
        else:
            props.append(f"host={word}" if word in vnodes else f"{word}=True")
    if ppn < 1:
        raise ValueError(f"nodes {spec!r}: ppn must be at least 1")
    return ":".join([f"{count}", f"ncpus={ppn * cpp}"] + props)


def parse_nodes(spec: str, vnodes: AbstractSet[str] = frozenset()) -> Request:
    """A legacy ``nodes=`` spec converted as PBS converts it (module docstring); a
    property equal to a name in ``vnodes`` becomes ``host=``.

    :raises ValueError: naming the spec
    """
    text = spec.strip()
    if text.startswith("nodes="):
        text = text[len("nodes=") :]
    if not text or len(text) > MAX_SPEC:
        raise ValueError(f"nodes {spec[:80]!r}: empty or longer than {MAX_SPEC} characters")
    body, *globs = text.split("#")
    mods = tuple(g for g in globs if g.lower() not in ("excl", "shared"))
    lowered = [g.lower() for g in globs]
    place = (
        "scatter:excl"
        if "excl" in lowered
        else "scatter:shared"
        if "shared" in lowered
        else "scatter"
    )
    parts = body.split("+")
    if len(parts) > MAX_PARTS:
        raise ValueError(f"nodes {spec[:80]!r}: more than {MAX_PARTS} parts")
    select = "+".join(_nodes_part(p, mods, vnodes, spec) for p in parts)
    return Request(parse_select(select), parse_place(place))


def parse_request(select: str, place: str = "", vnodes: AbstractSet[str] = frozenset()) -> Request:
    """A job's request from its ``select`` (or a legacy ``nodes=`` spec, whose conversion
    sets the place as PBS's does) and ``place``."""
    if select.strip().startswith("nodes="):
        return parse_nodes(select, vnodes)
    return Request(parse_select(select), parse_place(place))
