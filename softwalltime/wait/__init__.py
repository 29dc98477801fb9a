"""Queue-wait prediction: "when will my job start?" (no ``pbs``; only :mod:`.livedb` reads
the database).

Kumar and Vadhiyar, *Identifying Quick Starters* (PQStar): a job is a quick starter when
it waits at most an hour; PQStar marks quick starters from near-, mid- and far-term
history bounded by processor-occupancy similarity and leaves the rest to IBL. The
baselines it is compared with (IBL, a QBETS-style quantile bound, a log-uniform model) are
here too, with the paper's evaluation replay (``softwalltime eval-wait``).

Modules: :mod:`.workload` (jobs in, machine size), :mod:`.baselines` (IBL, quantile
bound, log-uniform), :mod:`.pqstar` (the system state and the criteria, one replay for all
methods), :mod:`.metrics` (the paper's measures), :mod:`.evaluate` (a trace to a report),
:mod:`.plots` (the paper's figures), :mod:`.live` (the queue and running jobs now as a wait
history) and :mod:`.livedb` (those read from ``live_jobs``).
"""
