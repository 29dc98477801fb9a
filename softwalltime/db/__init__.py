"""The database: the schema (SQLAlchemy Core), engines and migrations, and throwaway
local PostgreSQL clusters for the demo, the benchmarks and the tests.

Not on the hook path: the hook reads history through :mod:`softwalltime.hook.lookup`.
"""
