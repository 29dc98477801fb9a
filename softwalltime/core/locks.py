"""The advisory lock key every ingester of a database takes, one definition for the ingester
(which takes it) and ``status`` (which reports who holds it)."""

# pg_try_advisory_lock key shared by every ingester on a database: ASCII "swtingst".
# PostgreSQL shows a bigint key in pg_locks as classid (high 32 bits) and objid (low 32 bits).
INGEST_LOCK_KEY = 0x737774696E677374
