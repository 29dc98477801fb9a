"""DSN parsing as libpq does it, and redaction that never shows a secret (issue 9 item 9).

libpq itself (``psycopg2.extensions.parse_dsn``) is the reference for every parse.
"""

import string

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from psycopg2.extensions import parse_dsn

from softwalltime.core import dsn as dsnlib
from softwalltime.core.config import redact_dsn
from softwalltime.errors import ConfigError

# (DSN, what must be shown) for every form libpq accepts; the secret is always "Pa?ss#w0rd"
# or "s3cret" and must never appear.
CASES = [
    # unencoded ? and # in a URI password: libpq takes them as part of the password
    ("postgresql://u:Pa?ss#w0rd@host/db", "postgresql://u:***@host/db"),
    ("postgresql://u:Pa?ss#w0rd@host:5433/db?sslmode=require", None),
    ("postgres://u:s3cret@h1:5432,h2:5433/db", "postgres://u:***@h1:5432,h2:5433/db"),
    ("postgresql://u:s3%40cret@[::1]:5/d", "postgresql://u:***@[::1]:5/d"),
    ("postgresql://u@h/d?password=s3cret", "postgresql://u:***@h/d"),
    ("postgresql://u@h/d?sslpassword=s3cret&sslmode=verify-full", None),
    ("postgresql:///db?host=/var/run/postgresql&password=s3cret", None),
    ("postgresql://%2Fvar%2Frun%2Fpostgresql/db?user=u&password=s3cret", None),
    ("postgresql+psycopg2://u:s3cret@h/d", "postgresql+psycopg2://u:***@h/d"),
    ("host=h user=u password=s3cret dbname=d", "host=h user=u password=*** dbname=d"),
    ("host=h password='Pa?ss #w0rd' dbname=d", "host=h password=*** dbname=d"),
    ("host=h password = s3cret", "host=h password=***"),
    (r"host=h password='s3c\'ret' sslpassword=s3cret", "host=h password=*** sslpassword=***"),
    (r"host=h password=s3c\ ret", "host=h password=***"),
    ("host=/tmp port=5432 dbname=d", "host=/tmp port=5432 dbname=d"),
]


@pytest.mark.parametrize(("dsn", "shown"), CASES, ids=[c[0] for c in CASES])
def test_parse_matches_libpq_and_redact_hides_every_secret(dsn, shown):
    libpq = parse_dsn(dsn.replace("+psycopg2", ""))
    assert dsnlib.parse(dsn) == libpq
    text = redact_dsn(dsn)
    if shown is not None:
        assert text == shown
    for key, value in libpq.items():
        if "password" in key:
            assert value not in text and "***" in text
    # the redacted text is still a valid DSN for the same server
    back = dsnlib.parse(text)
    assert {k: v for k, v in back.items() if "password" not in k} == {
        k: v for k, v in libpq.items() if "password" not in k
    }
    assert "s3cret" not in dsnlib.describe(dsn) and "Pa?ss" not in dsnlib.describe(dsn)


@pytest.mark.parametrize(
    "bad",
    [
        "postgresql://u:xs3cretx@h/d?x",
        "host=h password=xs3cretx dbname",
        "host=h password='xs3cretx",
        "mysql://u:xs3cretx@h/d",
    ],
)
def test_malformed_dsns_are_refused_and_never_echoed(bad):
    with pytest.raises(ConfigError) as err:
        dsnlib.parse(bad)
    assert "xs3cretx" not in str(err.value)
    assert redact_dsn(bad) == "(unparsable DSN)"


# every printable character that libpq allows unescaped in a password of each form
_PW = st.text(
    alphabet=string.ascii_letters + string.digits + "!$%&()*+,-.;<=>?[]^_`{|}~#'\\ \"",
    min_size=6,
    max_size=20,
).filter(lambda s: s.strip() == s and len(set(s)) > 3)


@settings(max_examples=300, deadline=None)
@given(password=_PW)
def test_no_password_ever_shows(password):
    kv = "host=db user=u password='{}' dbname=d".format(
        password.replace("\\", "\\\\").replace("'", "\\'")
    )
    from urllib.parse import quote

    uri = "postgresql://u:{}@db/d".format(quote(password, safe=""))
    shown = {
        kv: "host=db user=u password=*** dbname=d",
        uri: "postgresql://u:***@db/d",
        uri + "?sslpassword=" + quote(password, safe=""): "postgresql://u:***@db/d?sslpassword=***",
    }
    for dsn, expected in shown.items():
        assert parse_dsn(dsn)["password"] == password
        assert dsnlib.parse(dsn)["password"] == password
        # exactly the DSN with *** (a password like "postgr" is part of any URI's text)
        assert redact_dsn(dsn) == expected
        assert dsnlib.scrub(password, dsn) == "***"


def test_host_lists_pair_with_ports_as_libpq_does():
    assert dsnlib.host_port_pairs(dsnlib.parse("host=a,b port=5")) == [("a", "5"), ("b", "5")]
    assert dsnlib.host_port_pairs(dsnlib.parse("postgresql://a:1,b:2/d")) == [
        ("a", "1"),
        ("b", "2"),
    ]
    with pytest.raises(ConfigError, match="2 hosts but 3 ports"):
        dsnlib.host_port_pairs(dsnlib.parse("host=a,b port=1,2,3"))
