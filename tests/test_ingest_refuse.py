"""Issue 16 case 6 through the ingester: a record that cannot be true is refused, reported
with ``file:line`` and its reason, counted under its rule, never stored and never fatal;
the fast path declines it and the checked path refuses it, as for any malformed line."""

from __future__ import annotations

import psycopg2
from softwalltime_ingest.parse import e_copy_line
from test_accounting_parse import _R_KEYS, IMPOSSIBLE
from test_accounting_parse import _line as record_line

from softwalltime import cli


def _with_id(line: str, seq: int) -> str:
    return line.replace(";5012.pbs01;", f";{seq}.pbs01;") + "\n"


def _rows(dsn: str, sql: str) -> list[tuple]:
    conn = psycopg2.connect(dsn)
    try:
        with conn.cursor() as cur:
            cur.execute(sql)
            return cur.fetchall()
    finally:
        conn.close()


def test_the_fast_path_declines_every_impossible_record():
    good = record_line("E", {})
    e_copy_line(good, "src", 0, None)  # a layout gets its template on its second sighting
    assert e_copy_line(good, "src", 0, None) is not None
    for changes, rule in IMPOSSIBLE:
        line = record_line("E", changes)
        assert [e_copy_line(line, "src", 0, None) for _ in range(2)] == [None, None], rule


def test_impossible_records_are_reported_counted_and_not_stored(
    capsys, caplog, fresh_dsn, tmp_path
):
    lines = [_with_id(record_line("E", {}), 1), _with_id(record_line("R", {}), 1)]
    cases = IMPOSSIBLE
    lines += [_with_id(record_line("E", c), 100 + i) for i, (c, _) in enumerate(cases)]
    r_cases = [(c, r) for c, r in cases if set(c) <= _R_KEYS]
    lines += [_with_id(record_line("R", c), 200 + i) for i, (c, _) in enumerate(r_cases)]
    lines.append(_with_id(record_line("E", {}), 2))
    log = tmp_path / "20250402"
    log.write_text("".join(lines))

    code = cli.main(["--dsn", fresh_dsn, "ingest", "--no-progress", str(log)])
    out, err = capsys.readouterr()

    assert code == 0, err  # refused records are never fatal
    assert _rows(fresh_dsn, "SELECT job_id FROM finished_jobs ORDER BY 1") == [
        ("1.pbs01",),
        ("2.pbs01",),
    ]
    assert _rows(fresh_dsn, "SELECT job_id FROM job_reruns") == [("1.pbs01",)]
    e_row = next(x for x in out.splitlines() if x.startswith("E "))
    assert e_row.split()[-4:] == [
        str(2 + len(cases)),
        "2",
        "0",
        str(len(cases)),
    ]  # read stored skipped bad
    r_row = next(x for x in out.splitlines() if x.startswith("R "))
    assert r_row.split()[-4:] == [str(1 + len(r_cases)), "1", "0", str(len(r_cases))]
    # the first ten with file:line and the reason, as every malformed line
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 10
    for i, (_, rule) in enumerate(cases[:10]):  # lines 3 on (after the good E and R)
        assert warnings[i].startswith(f"{log}:{i + 3}: {rule.split()[0]}="), warnings
    # and every one counted under its rule
    summary = next(x for x in out.splitlines() if x.startswith("refused as impossible"))
    expected: dict[str, int] = {}
    for _, rule in cases + r_cases:
        expected[rule] = expected.get(rule, 0) + 1
    for rule, n in expected.items():
        assert f"{n} {rule}" in summary, summary
    assert f"{len(cases) + len(r_cases)} malformed line(s) in all" in out
