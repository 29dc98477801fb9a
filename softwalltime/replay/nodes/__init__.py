"""The machine at node level (issue 46): a job's select chunks and place (:mod:`.spec`),
where they fit on a site's vnodes as PBS searches them (:mod:`.placement`), and the
machine model with PBS's calendar that the scheduler core runs on (:mod:`.model`)."""

from .model import SKIP_NEVER_FITS, NodeCycle, NodeModel, fit_site, queue_pool
from .placement import View, place
from .spec import Chunk, Place, Request, parse_nodes, parse_place, parse_request, parse_select

__all__ = [
    "SKIP_NEVER_FITS", "Chunk", "NodeCycle", "NodeModel", "Place", "Request", "View",
    "fit_site", "parse_nodes", "parse_place", "parse_request", "parse_select", "place",
    "queue_pool",
]  # fmt: skip
