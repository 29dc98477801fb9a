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


@pytest.mark.parametrize("body", [b"hello", b"", SAMPLE.read_bytes()])
def test_a_gz_that_is_not_gzip_is_an_error(capsys, caplog, fresh_dsn, tmp_path, body):
    """Issue 32: a .gz that is not gzip was 'no complete line yet; left for the next run',
    exit 0 (and a plain log named .gz was read as if it were one)."""
    path = tmp_path / "20261123.gz"
    path.write_bytes(body)
    code, out, err = ingest(capsys, fresh_dsn, str(path))
    assert code == 1 and "(1 unusable)" in out and "no complete line" not in out
    assert err == "softwalltime ingest: 1 file(s) could not be read (see above)\n"
    (line,) = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert line == f"{path}: named .gz but not gzip data; nothing read"
    assert _stored(fresh_dsn) == (0, 0)


def test_a_text_file_with_no_record_is_an_error_without_a_checkpoint(
    capsys, caplog, fresh_dsn, tmp_path
):
    """Issue 32: /etc/passwd gave '26 malformed line(s)', exit 0, with a checkpoint stored,
    so cron never alerted. A file with no valid record at all is exit 1, no checkpoint,
    however long (the checkpoint is not taken half way either)."""
    passwd = "".join(f"user{i}:x:{1000 + i}:{1000 + i}::/home/user{i}:/bin/sh\n" for i in range(26))
    path = tmp_path / "20261123"
    path.write_text(passwd)
    code, out, err = ingest(capsys, fresh_dsn, str(path))
    assert code == 1 and "(1 unusable)" in out
    assert err == "softwalltime ingest: 1 file(s) could not be read (see above)\n"
    errors = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert errors == [f"{path}: not an accounting log (26 lines, none a record); nothing stored"]
    assert _stored(fresh_dsn) == (0, 0)
    caplog.clear()
    path.write_text(passwd * 400)  # 10,400 lines: past a batch's worth of lines
    code, out, _ = ingest(capsys, fresh_dsn, "--batch-size", "100", str(path))
    assert code == 1 and _stored(fresh_dsn) == (0, 0)


def test_a_mostly_valid_file_keeps_counting_its_malformed_lines(
    capsys, caplog, fresh_dsn, tmp_path
):
    path = tmp_path / "20261123"
    path.write_text("torn line\n" + SAMPLE.read_text())
    code, out, _ = ingest(capsys, fresh_dsn, str(path))
    total = next(line.split() for line in out.splitlines() if line.split()[:1] == ["total"])
    assert code == 0 and total[-1] == "1"  # read, stored, skipped, malformed
    assert f"{path}:1: not an accounting record" in caplog.text
    assert _stored(fresh_dsn)[0] > 0 and _stored(fresh_dsn)[1] == 1
