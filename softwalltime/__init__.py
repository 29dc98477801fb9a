"""softwalltime: soft-walltime predictions for PBS Professional / OpenPBS.

This package is imported by pbs_server's embedded Python through the hook, so
everything it imports at package level must run on Python 3.6+ with only the
standard library (and psycopg2 where a database is needed). SQLAlchemy-based
modules (schema, db, cli) are imported explicitly by front ends only.
"""

import logging

__version__ = "0.1.0"

# Library code logs; only entry points (cli.main, the ingester, the hook) attach handlers.
logging.getLogger(__name__).addHandler(logging.NullHandler())
