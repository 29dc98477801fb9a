"""Every table, in one place (SQLAlchemy Core). Created only by alembic migrations.

Names are for people reading them in ``psql``: ``finished_jobs``, ``job_reruns``,
``ingest_checkpoints``. Durations are integer seconds (``*_s``), instants are
``timestamptz`` (``*_at``).
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

metadata = sa.MetaData(
    naming_convention={
        "ix": "ix_%(column_0_label)s",
        "uq": "uq_%(table_name)s_%(column_0_name)s",
        "ck": "ck_%(table_name)s_%(constraint_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    }
)

finished_jobs = sa.Table(
    "finished_jobs",
    metadata,
    # Natural key: PBS job ids wrap at max_job_sequence_id, so (server, job_id) alone repeats.
    sa.Column("server", sa.Text, primary_key=True, comment="PBS server name, e.g. pbs01"),
    sa.Column(
        "job_id", sa.Text, primary_key=True, comment="full id as logged: 123.pbs01, 7[3].pbs01"
    ),
    sa.Column("ctime", sa.DateTime(timezone=True), primary_key=True, comment="job creation time"),
    sa.Column(
        "job_seq", sa.BigInteger, nullable=False, comment="numeric part of the id; orders ties"
    ),
    sa.Column(
        "array_index", sa.Integer, nullable=True, comment="subjob index, NULL for plain jobs"
    ),
    sa.Column("username", sa.Text, nullable=False),
    sa.Column("groupname", sa.Text, nullable=True),
    sa.Column("project", sa.Text, nullable=True),
    sa.Column("account", sa.Text, nullable=True),
    sa.Column("queue", sa.Text, nullable=True),
    sa.Column("job_name", sa.Text, nullable=True),
    sa.Column("walltime_s", sa.Integer, nullable=True, comment="Resource_List.walltime"),
    sa.Column("soft_walltime_s", sa.Integer, nullable=True, comment="Resource_List.soft_walltime"),
    sa.Column(
        "runtime_s", sa.Integer, nullable=True, comment="resources_used.walltime of the last run"
    ),
    sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
    sa.Column("ended_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("exit_status", sa.Integer, nullable=True),
    sa.Column("ncpus", sa.Integer, nullable=True),
    sa.Column("ngpus", sa.Integer, nullable=True),
    sa.Column("nodect", sa.Integer, nullable=True),
    sa.Column("mem_bytes", sa.BigInteger, nullable=True, comment="Resource_List.mem"),
    sa.Column("select_spec", sa.Text, nullable=True, comment="Resource_List.select as typed"),
    sa.Column("run_count", sa.Integer, nullable=True),
    sa.Column("qtime", sa.DateTime(timezone=True), nullable=True, comment="entered its queue"),
    sa.Column("etime", sa.DateTime(timezone=True), nullable=True, comment="became eligible"),
    sa.Column("place", sa.Text, nullable=True, comment="Resource_List.place as logged"),
    sa.Column("exec_vnode", sa.Text, nullable=True, comment="the vnodes and resources it ran on"),
    sa.Column(
        "source_file", sa.Text, nullable=True, comment="accounting file the E record came from"
    ),
    sa.Column("source_offset", sa.BigInteger, nullable=True, comment="byte offset of the E record"),
    sa.Column(
        "ingested_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
    ),
    comment="One row per finished job (PBS E record); what the predictors read.",
)

# "This user's last N finished jobs by end time (ties: higher job id first)" is an
# index-only scan: the key gives the order, INCLUDE carries what the predictors read.
sa.Index(
    "ix_finished_jobs_user_recent",
    finished_jobs.c.username,
    finished_jobs.c.ended_at.desc(),
    finished_jobs.c.job_seq.desc(),
    postgresql_include=["runtime_s", "walltime_s", "ncpus", "server"],
)

job_reruns = sa.Table(
    "job_reruns",
    metadata,
    sa.Column("server", sa.Text, primary_key=True),
    sa.Column("job_id", sa.Text, primary_key=True),
    sa.Column("ctime", sa.DateTime(timezone=True), primary_key=True),
    sa.Column("run_count", sa.Integer, primary_key=True, comment="run_count of the R record"),
    sa.Column("username", sa.Text, nullable=False),
    sa.Column(
        "runtime_s", sa.Integer, nullable=True, comment="resources_used.walltime of that run"
    ),
    sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
    sa.Column("ended_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("exit_status", sa.Integer, nullable=True),
    sa.Column("source_file", sa.Text, nullable=True),
    sa.Column("source_offset", sa.BigInteger, nullable=True),
    sa.Column(
        "ingested_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
    ),
    comment="PBS R records: runs that ended in a rerun/requeue (the E record has the last run).",
)

ingest_checkpoints = sa.Table(
    "ingest_checkpoints",
    metadata,
    sa.Column("path", sa.Text, primary_key=True, comment="absolute path of the accounting file"),
    sa.Column("inode", sa.BigInteger, nullable=True),
    sa.Column(
        "fingerprint",
        sa.Text,
        nullable=False,
        comment="hash of the first line: detects replacement",
    ),
    sa.Column(
        "byte_offset", sa.BigInteger, nullable=False, comment="end of the last complete line"
    ),
    sa.Column("line_number", sa.BigInteger, nullable=False, comment="lines consumed so far"),
    sa.Column(
        "updated_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
    ),
    comment="Ingester state per file, committed with the rows it covers.",
)

# Predictor "calibrated" (softwalltime.core.calibrated): the site-wide table the hook
# reads (cached) and ``softwalltime calibrate`` maintains from finished jobs, in end order.
calibration_cells = sa.Table(
    "calibration_cells",
    metadata,
    sa.Column("bin", sa.Integer, primary_key=True, comment="job class bin of the predictor"),
    sa.Column("rule", sa.Integer, primary_key=True, comment="rule id (calibrated.RULES)"),
    sa.Column("jobs", sa.BigInteger, nullable=False, comment="finished jobs seen in the bin"),
    sa.Column(
        "under_jobs",
        sa.BigInteger,
        nullable=False,
        comment="of them, under-estimated by the rule",
    ),
    sa.Column("accuracy_sum", sa.Float(53), nullable=False, comment="sum of the rule's accuracies"),
    comment="Predictor calibrated: outcomes of each rule per job class bin (site-wide).",
)

calibration_state = sa.Table(
    "calibration_state",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, comment="always 1: one row"),
    sa.Column("lam", sa.Float(53), nullable=False, comment="under-estimate penalty lambda"),
    sa.Column("jobs", sa.BigInteger, nullable=False, comment="finished jobs learned from"),
    sa.Column("under_jobs", sa.BigInteger, nullable=False, comment="of them, under-estimated"),
    sa.Column("target_under_pct", sa.Float(53), nullable=False, comment="target used"),
    sa.Column(
        "choices",
        sa.Text,
        nullable=False,
        server_default="[]",
        comment="JSON list: the rule chosen in each bin (what the hook reads)",
    ),
    sa.Column(
        "updated_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
    ),
    sa.CheckConstraint("id = 1", name="one_row"),
    comment="Predictor calibrated: lambda, totals and the rule per bin (one row).",
)

# Migration 0008, predictor "learned" (softwalltime.core.learned): its site table as the
# Learner keeps it (per level, bin and rule), and the one row the hook reads (the rule per
# fine bin for the soft walltime and the rank); ``softwalltime calibrate`` writes both.
learned_cells = sa.Table(
    "learned_cells",
    metadata,
    sa.Column(
        "level", sa.SmallInteger, primary_key=True, comment="0 fine bin, 1 coarse bin, 2 site"
    ),
    sa.Column("bin", sa.Integer, primary_key=True, comment="bin of the level (site: 0)"),
    sa.Column("rule", sa.Integer, primary_key=True, comment="rule id (learned.RULES)"),
    sa.Column(
        "jobs", sa.Float(53), nullable=False, comment="jobs seen in the bin (prior: fractions)"
    ),
    sa.Column(
        "under_jobs", sa.Float(53), nullable=False, comment="of them, under-estimated by the rule"
    ),
    sa.Column("accuracy_sum", sa.Float(53), nullable=False, comment="sum of the rule's accuracies"),
    comment="Predictor learned: outcomes of each rule per bin and level (site-wide).",
)

learned_state = sa.Table(
    "learned_state",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, comment="always 1: one row"),
    sa.Column("lam", sa.Float(53), nullable=False, comment="under-estimate penalty lambda"),
    sa.Column("log_lam", sa.Float(53), nullable=False, comment="its logarithm, as learned"),
    sa.Column("jobs", sa.BigInteger, nullable=False, comment="finished jobs learned from"),
    sa.Column("under_jobs", sa.BigInteger, nullable=False, comment="of them, under-estimated"),
    sa.Column(
        "v3_under_jobs", sa.BigInteger, nullable=False, comment="of them, under-estimated by v3"
    ),
    sa.Column(
        "site_jobs",
        sa.Float(53),
        nullable=False,
        comment="jobs in the site's cells (prior included)",
    ),
    sa.Column("target", sa.Text, nullable=False, comment="fixed or v3"),
    sa.Column(
        "target_under_pct", sa.Float(53), nullable=False, comment="target used (v3: v3's rate)"
    ),
    sa.Column("prior", sa.Boolean, nullable=False, comment="started from the shipped prior"),
    sa.Column(
        "choices",
        sa.Text,
        nullable=False,
        server_default="{}",
        comment="JSON: the rule per fine bin, soft walltime and rank (what the hook reads)",
    ),
    sa.Column(
        "updated_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
    ),
    sa.CheckConstraint("id = 1", name="one_row"),
    sa.CheckConstraint("target IN ('fixed', 'v3')", name="target"),
    comment="Predictor learned: lambda, totals and the rules per fine bin (one row).",
)

# Migration 0006: the history's change counter. A statement trigger on finished_jobs
# increments it in the writer's transaction; the hook keeps lookups while it is unchanged.
history_version = sa.Table(
    "history_version",
    metadata,
    sa.Column("one", sa.Boolean, primary_key=True, server_default=sa.true(), comment="always true"),
    sa.Column(
        "version",
        sa.BigInteger,
        nullable=False,
        server_default="0",
        comment="changes to finished_jobs committed so far",
    ),
    sa.CheckConstraint("one", name="one_row"),
    comment="Change counter of finished_jobs (one row; the hook's kept lookups use it).",
)

# Migration 0007: jobs queued or running now, from the Q, S, R and D records (ingest/).
# The E record of a job deletes its row; a D or A record leaves a tombstone (state
# "deleted") that a Q or S read again cannot overwrite; the ingester drops stale rows.
LIVE_STATES = ("queued", "running", "deleted")
live_jobs = sa.Table(
    "live_jobs",
    metadata,
    sa.Column("server", sa.Text, primary_key=True, comment="PBS server name"),
    sa.Column("job_id", sa.Text, primary_key=True, comment="full id as logged"),
    sa.Column("ctime", sa.DateTime(timezone=True), primary_key=True, comment="job creation time"),
    sa.Column("job_seq", sa.BigInteger, nullable=False, comment="numeric part of the id"),
    sa.Column("state", sa.Text, nullable=False, comment="queued, running, or deleted (tombstone)"),
    sa.Column("username", sa.Text, nullable=False),
    sa.Column("queue", sa.Text, nullable=True),
    sa.Column("ncpus", sa.Integer, nullable=True, comment="Resource_List.ncpus"),
    sa.Column("walltime_s", sa.Integer, nullable=True, comment="Resource_List.walltime"),
    sa.Column("soft_walltime_s", sa.Integer, nullable=True, comment="Resource_List.soft_walltime"),
    sa.Column("qtime", sa.DateTime(timezone=True), nullable=True, comment="entered its queue"),
    sa.Column(
        "started_at",
        sa.DateTime(timezone=True),
        nullable=True,
        comment="start of the current run (running only)",
    ),
    sa.Column(
        "event_at",
        sa.DateTime(timezone=True),
        nullable=False,
        comment="when the state began: qtime (Q), start (S), end of the run (R)",
    ),
    sa.Column("source_file", sa.Text, nullable=True, comment="file of the record"),
    sa.Column("source_offset", sa.BigInteger, nullable=True, comment="its byte offset"),
    sa.Column(
        "updated_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
    ),
    sa.CheckConstraint("state IN ('queued', 'running', 'deleted')", name="state"),
    comment="Jobs queued or running now, from Q, S, R and D records (deleted: tombstones).",
)

# Migration 0009 (issue 48): the scheduling policy's changes, by ``softwalltime policy`` or
# seen by ``softwalltime status``; the settings as JSON objects (pbsserver/policy.py).
policy_changes = sa.Table(
    "policy_changes",
    metadata,
    sa.Column(
        "id",
        sa.BigInteger,
        sa.Identity(always=True),
        primary_key=True,
        comment="order of the records",
    ),
    sa.Column(
        "changed_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
    ),
    sa.Column(
        "changed_by",
        sa.Text,
        nullable=False,
        comment="OS user (and SUDO_USER), or qmgr (seen by status)",
    ),
    sa.Column("action", sa.Text, nullable=False, comment="apply, revert or outside"),
    sa.Column("label", sa.Text, nullable=True, comment="the search label applied, if any"),
    sa.Column(
        "before",
        postgresql.JSONB,
        nullable=True,
        comment="the settings before (NULL: first seen)",
    ),
    sa.Column("after", postgresql.JSONB, nullable=False, comment="the settings after"),
    sa.Column(
        "commands",
        sa.Text,
        nullable=False,
        server_default="",
        comment="the commands run, one a line",
    ),
    sa.Column(
        "search",
        postgresql.JSONB,
        nullable=True,
        comment="simulate --search --json that recommended it (capped)",
    ),
    sa.CheckConstraint("action IN ('apply', 'revert', 'outside')", name="action"),
    comment="The scheduling policy's changes: by softwalltime policy, or seen by status.",
)
