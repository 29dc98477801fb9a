"""The hook runtime: what pbs_server's embedded Python runs around the kernel.

Python 3.6+ syntax, standard library only: the PostgreSQL client (:mod:`.pgwire`), the
history lookup (:mod:`.lookup`), the state kept between events (:mod:`.state`), the settings
cache (:mod:`.settings`), the bridge from logging to ``pbs.logmsg`` (:mod:`.hooklog`) and
the writing of a decision onto the job (:mod:`.event`). Imports :mod:`softwalltime.core`.
"""
