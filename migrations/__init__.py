"""Alembic migrations of the softwalltime schema (installed as ``softwalltime_migrations``)."""
