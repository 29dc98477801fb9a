"""One exception hierarchy for the whole product.

The library raises these; only front ends (the CLI, the ingester's entry point,
the hook) turn them into messages and exit codes.
"""


class SoftwalltimeError(Exception):
    """Base class: an expected failure with a message fit for an administrator."""


class ConfigError(SoftwalltimeError):
    """The configuration is invalid; the message names the file (or variable) and key."""


class DatabaseError(SoftwalltimeError):
    """The database cannot be reached or used; the message never contains a password."""


class ParseError(SoftwalltimeError, ValueError):
    """A value (duration, size, record) could not be parsed."""


class SchemaMissingError(DatabaseError):
    """The database has no softwalltime tables (or not all of them) yet."""

    def __init__(self, detail: str = "") -> None:
        DatabaseError.__init__(
            self,
            "the softwalltime tables do not exist in this database{}: run 'softwalltime db"
            " upgrade' first".format(f" ({detail})" if detail else ""),
        )


# SQLSTATE undefined_table: what PostgreSQL answers before the migrations ran.
UNDEFINED_TABLE = "42P01"
