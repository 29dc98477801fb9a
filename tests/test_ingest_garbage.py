"""A file that is no accounting log, named on the command line, and the summary's word on
the malformed lines (issue 21: found on a fresh clone)."""

from __future__ import annotations

import gzip
import random
from pathlib import Path

import psycopg2
import pytest

from softwalltime import cli

SAMPLE = Path(__file__).resolve().parents[1] / "softwalltime" / "data" / "openpbs-23.06-local.log"


def ingest(capsys, dsn: str, *args: str) -> tuple[int, str, str]:
    code = cli.main(["--dsn", dsn, "ingest", "--no-progress", *args])
    out, err = capsys.readouterr()
    return code, out, err


def _stored(dsn: str) -> tuple[int, int]:
    conn = psycopg2.connect(dsn)
    try:
        with conn.cursor() as cur:
            cur.execute(
                "SELECT (SELECT count(*) FROM finished_jobs), count(*) FROM ingest_checkpoints"
            )
            return cur.fetchone()
    finally:
        conn.close()


def _garbage(n: int = 20000) -> bytes:
    rng = random.Random(21)
    return bytes(rng.randrange(256) for _ in range(n))


@pytest.mark.parametrize("kind", ["plain", "gz", "no NUL"])
def test_binary_garbage_is_refused_whole(capsys, caplog, fresh_dsn, tmp_path, kind):
    """Was: exit 0, 79 'malformed lines' with mojibake on stderr, and a checkpoint."""
    data = _garbage()
    if kind == "no NUL":
        data = data.replace(b"\x00", b"\xff")
    path = tmp_path / ("20261123.gz" if kind == "gz" else "20261123")
    path.write_bytes(gzip.compress(data) if kind == "gz" else data)
    code, out, err = ingest(capsys, fresh_dsn, str(path))
    assert code == 1 and out.startswith("softwalltime ingest: 1 file(s) (1 unusable), 0.0 MB,")
    assert err == "softwalltime ingest: 1 file(s) could not be read (see above)\n"
    (line,) = [r.getMessage() for r in caplog.records if r.levelname in ("WARNING", "ERROR")]
    assert line.startswith(f"{path}: not an accounting log (binary data: ")
    assert line.endswith("); nothing read")
    assert "\ufffd" not in caplog.text and "malformed" not in caplog.text
    assert _stored(fresh_dsn) == (0, 0)


def test_a_log_with_records_first_is_read_whatever_follows(capsys, fresh_dsn, tmp_path):
    """A crash can leave NUL bytes in a real log: its records are kept."""
    path = tmp_path / "20261123"
    path.write_bytes(SAMPLE.read_bytes() + b"\x00" * 4096 + b"\n")
    code, out, _ = ingest(capsys, fresh_dsn, str(path))
    assert code == 0 and _stored(fresh_dsn)[0] > 0
    assert "1 malformed line(s)" not in out


def test_the_summary_says_where_the_malformed_lines_went(capsys, caplog, fresh_dsn, tmp_path):
    """Was: 'the first 10 are shown above', of lines that went to stderr (under cron,
    stdout to /dev/null or a mail of its own, they are nowhere above)."""
    path = tmp_path / "20261123"
    path.write_text(SAMPLE.read_text() + "".join(f"torn line {i}\n" for i in range(12)))
    code, out, err = ingest(capsys, fresh_dsn, str(path))
    assert code == 0
    assert "12 malformed line(s) in all; the first 10 went to stderr" in out
    assert caplog.text.count("not an accounting record") == 10
