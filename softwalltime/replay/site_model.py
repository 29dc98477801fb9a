"""A workload on a site file's model (issue 46): routed to its queues, each job's chunks with
its queue's defaults, on the site's vnodes behind its run limits, in its queue order (pure).

:func:`site_run` is the one way the commands (``simulate --policies``, ``--search``, the fit,
``wait``, ``eval-start``) put a workload on a site file; :class:`SiteModel` then builds the
machine model and the cycle's :class:`.queues.SiteOrder` for any part of that workload (the
search's halves, the fit's replay), a fresh model per simulation (a model holds the running
jobs).

What the server does to a job before the scheduler sees it, in OpenPBS 23.06.06's order
(line numbers of that tree):

- **Routing** (:func:`.queues.route_workload`): from the queue the job names (none: the
  site's default queue) by its walltime; a job no started execution queue takes is dropped,
  counted.
- **The queue's defaults**: ``resources_default.place`` where the job has no place
  (``set_deflt_resc`` with the queue's ``resources_default``, svr_jobfunc.c:2184-2187; no
  place at all: ``free``, svr_jobfunc.c:2211-2220), and ``default_chunk.RES`` added to each
  chunk of the select that does not name RES (``do_schedselect``, vnparse.c:4648-4676): how
  CERIT-SC's site file gives each queue its (overlapping) pool of vnodes, a ``Qlist``
  string array that every chunk of ``q_1d`` then asks for (``Qlist=q_1d``).
- **A job without a select** (a trace that records processors only): on a site file its
  ``P`` processors are ``P`` chunks of one cpu, ``select=P:ncpus=1`` with ``place=free``
  (PBS then puts as many on a host as it holds, node_info.cpp:2447-2525): the trace counts
  processors, not nodes, so a job is not held to one node it never asked for. On one cpu
  per node (the SWF traces' site files) that is the only select that runs the trace's jobs,
  and there, without reservations, it is the pool of :mod:`.pool`; with ``backfill_depth``
  the top job holds named vnodes where the pool holds a count, and a job the pool
  backfills beside it may find its cpus among them (``tests/test_site_model.py`` checks
  both).
- **Jobs no pool can ever hold** (:func:`.nodes.fit_site`): dropped, counted.
"""

from __future__ import annotations

from typing import Any, Dict, NamedTuple, Optional, Sequence, Tuple

from ..site_file import Site
from .limits import Limits, SiteLimits, job_entities
from .nodes import NodeModel, fit_site
from .nodes.spec import parse_select
from .queues import SiteOrder, route_workload, site_order
from .sim_workload import SimWorkload, SiteColumns


def with_queue_defaults(site: Site, select: str, place: str, queue: str) -> Tuple[str, str]:
    """The select and place a job of ``queue`` has once the server applied the queue's
    ``default_chunk`` and ``resources_default.place`` (module docstring).

    :raises ValueError: the select is not one PBS reads (naming it)
    """
    q = site.queue(queue)
    if q is None:
        return select, place
    if not place and q.default_place:
        place = q.default_place
    if not q.default_chunk or not select or select.strip().startswith("nodes="):
        return select, place  # a legacy spec keeps its conversion's own (not modelled)
    select = select.strip().removeprefix("select=")
    parse_select(select)  # refuse a bad one before adding to it
    parts = []
    for part in select.split("+"):
        words = part.split(":")
        named = {w.partition("=")[0].lower() for w in words[words[0].isdigit() :]}
        extra = [f"{k}={_value(v)}" for k, v in q.default_chunk.items() if k.lower() not in named]
        parts.append(":".join([part] + extra))
    return "+".join(parts), place


def _value(v: Any) -> str:
    return "True" if v is True else "False" if v is False else str(v)


def _columns(site: Site, work: SimWorkload, queues: Sequence[str]) -> SiteColumns:
    """Each job's select and place with its queue's defaults, and its execution queue."""
    cols = work.site
    n = len(work.submit)
    blank = [""] * n
    selects = cols.select if cols is not None else blank
    places = cols.place if cols is not None else blank
    seen: Dict[Tuple[str, str, str], Tuple[str, str]] = {}
    sel, pla = [], []
    for j in range(n):
        select = selects[j] or f"{work.procs[j]}:ncpus=1"
        key = (select, places[j], queues[j])
        got = seen.get(key)
        if got is None:
            got = seen[key] = with_queue_defaults(site, *key)
        sel.append(got[0])
        pla.append(got[1])
    groups = cols.group if cols is not None else blank
    accounts = cols.account if cols is not None else list(blank)
    return SiteColumns(sel, pla, list(queues), list(groups), list(accounts))


class SiteModel(NamedTuple):
    """A site file's model of a workload :func:`site_run` prepared (its jobs' queues are
    their execution queues)."""

    site: Site

    def build(self, work: SimWorkload) -> Tuple[Any, SiteOrder]:
        """A fresh machine model (the vnodes, behind the run limits when the site has any)
        and the cycle's queue order, for ``work`` (all or part of :func:`site_run`'s)."""
        if work.site is None:
            raise ValueError("the workload was not put on the site (site_run)")
        queues = work.site.queue
        inner = NodeModel(self.site, work)
        lim = Limits(self.site, job_entities(queues, work.user, work.site.group, work.procs))
        model = SiteLimits(inner, lim) if lim.any() else inner
        return model, site_order(self.site, queues, lim.class_key)

    def describe(self) -> str:
        """What the model is, for the lines that say which model ran."""
        execution = sum(1 for q in self.site.queues if q.kind == "execution")
        return (
            f"site model: {len(self.site.vnodes)} vnodes, {execution} queues "
            f"({self.site.name}, {self.site.ncpus} cpus)"
        )


def site_run(site: Site, work: SimWorkload) -> Tuple[SimWorkload, SiteModel, Dict[str, int]]:
    """``work`` on ``site``: routed, each job's chunks with its queue's defaults, without
    the jobs no started queue takes or no pool can hold (the module docstring); the model
    that simulates it (:meth:`SiteModel.build`), and the jobs dropped here by reason.

    :raises ValueError: a job's select or place is not one PBS reads (naming it)
    """
    before = dict(work.skipped)
    routed, queues = route_workload(site, work)
    routed = routed._replace(site=_columns(site, routed, queues))
    fitted = fit_site(routed, site)
    dropped = {k: v - before.get(k, 0) for k, v in fitted.skipped.items() if v != before.get(k, 0)}
    return fitted, SiteModel(site), dropped


def put_on_site(site: Optional[Site], work: SimWorkload) -> Tuple[SimWorkload, Optional[SiteModel]]:
    """:func:`site_run` when there is a site (the dropped jobs are in the workload's
    ``skipped``), else ``work`` as it is and no model (the pool)."""
    if site is None:
        return work, None
    fitted, model, _ = site_run(site, work)
    return fitted, model
