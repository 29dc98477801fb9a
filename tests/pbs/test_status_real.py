"""``softwalltime status`` against the real server (issue 11): a healthy install, the
database down, the hook disabled, the ingester behind; each with its Nagios exit code."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pbsctl
import psycopg2
from conftest import HOOK, SOFTWALLTIME
from prometheus_client.parser import text_string_to_metric_families

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "softwalltime" / "data" / "openpbs-23.06-local.log"


def status(tmp_path, dsn: str, accounting: Path, since_s: float, *args: str, form="--json"):
    cfg = tmp_path / "status.json"
    cfg.write_text(
        json.dumps(
            {
                "pbs_command_prefix": [str(pbsctl.PBSX)],
                "accounting_dir": str(accounting),
                "dsn": dsn,
            }
        )
    )
    return subprocess.run(
        [SOFTWALLTIME, "--config", str(cfg), "status", "--hook", HOOK]
        + ["--since", str(int(since_s) + 2), form, *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def states(proc) -> dict[str, str]:
    data = json.loads(proc.stdout)
    return {c["name"]: c["state"] for c in data["checks"]}


def accounting_dir(tmp_path: Path, dsn: str) -> tuple[Path, Path]:
    """A private accounting directory with real records, fully ingested."""
    directory = tmp_path / "accounting"
    directory.mkdir()
    newest = directory / time.strftime("%Y%m%d")
    lines = [ln for ln in SAMPLE.read_text().splitlines(keepends=True) if not ln.startswith("#")]
    newest.write_text("".join(lines[: len(lines) // 2]))
    subprocess.run(
        [SOFTWALLTIME, "--dsn", dsn, "ingest", "--no-progress", "--server", "vm", str(newest)],
        check=True,
        capture_output=True,
        timeout=120,
    )
    return directory, newest


def test_status_healthy_then_hook_disabled_then_ingester_behind(install, hook_db, jobs, tmp_path):
    start = time.monotonic()
    # a fresh embedded interpreter (pbs_server keeps modules between hook runs)
    pbsctl.qmgr("set server python_restart_max_hooks = 1")
    pbsctl.qmgr("set server python_restart_min_interval = 1")
    install(dsn=hook_db)
    directory, newest = accounting_dir(tmp_path, hook_db)
    time.sleep(1.1)
    jobs.append(pbsctl.qsub("-h -l walltime=10:00:00"))
    assert pbsctl.resource(jobs[0], "soft_walltime") == "02:45:00"

    proc = status(tmp_path, hook_db, directory, time.monotonic() - start)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert states(proc) == {
        "hook": "OK",
        "config": "OK",
        "database": "OK",
        "imports": "OK",
        "activity": "OK",
        "ingester": "OK",
        "history": "OK",
        "policy": "OK",
    }
    checks = {c["name"]: c for c in json.loads(proc.stdout)["checks"]}
    assert checks["activity"]["details"]["set"] >= 1
    assert checks["ingester"]["details"]["lag_bytes"] == 0
    assert "vm " in checks["history"]["summary"] and "seed " in checks["history"]["summary"]
    # the table and the Prometheus file
    prom = tmp_path / "softwalltime.prom"
    table = status(
        tmp_path, hook_db, directory, time.monotonic() - start, "--prometheus", str(prom)
    )
    assert table.returncode == 0
    assert "softwalltime_status 0\n" in prom.read_text()
    assert 'softwalltime_check_state{check="imports"} 0' in prom.read_text()
    # parsed by Prometheus's own parser, the newest end time exact to the second
    samples = {
        (x.name, x.labels.get("server")): x.value
        for family in text_string_to_metric_families(prom.read_text())
        for x in family.samples
    }
    conn = psycopg2.connect(hook_db)
    with conn, conn.cursor() as cur:
        cur.execute(
            "SELECT extract(epoch FROM max(ended_at))::bigint FROM finished_jobs"
            " WHERE server = 'vm'"
        )
        (newest_end,) = cur.fetchone()
    conn.close()
    assert samples["softwalltime_history_newest_end_timestamp_seconds", "vm"] == newest_end
    assert samples["softwalltime_hook_jobs_set", None] >= 1
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".softwalltime-")] == []
    # the Nagios form: one line, exit 0
    nagios = status(tmp_path, hook_db, directory, time.monotonic() - start, form="--nagios")
    assert nagios.returncode == 0, nagios.stdout + nagios.stderr
    assert nagios.stdout.startswith("SOFTWALLTIME OK - 8 checks OK: hook, config, ")
    assert nagios.stdout.count("\n") == 1 and nagios.stdout.count(" | ") == 1

    # a newer accounting file that was never read, while the older file's checkpoint is
    # fresh: behind (found on the real server: OK, by the age of any checkpoint)
    unread = directory / "99991231"
    unread.write_text(newest.read_text())
    proc = status(tmp_path, hook_db, directory, time.monotonic() - start)
    assert proc.returncode == 1, proc.stdout
    ingester = next(c for c in json.loads(proc.stdout)["checks"] if c["name"] == "ingester")
    assert ingester["state"] == "WARNING" and "99991231" in ingester["summary"]
    assert "never read" in ingester["summary"] and ingester["details"]["never_read"] is True
    nagios = status(tmp_path, hook_db, directory, time.monotonic() - start, form="--nagios")
    assert nagios.returncode == 1 and nagios.stdout.startswith("SOFTWALLTIME WARNING - ingester")
    unread.unlink()

    # the ingester behind: new records and no checkpoint written for two hours
    with open(newest, "a") as fh:
        lines = [ln for ln in SAMPLE.read_text().splitlines(keepends=True) if ln[0] != "#"]
        fh.write("".join(lines[len(lines) // 2 :]))
    conn = psycopg2.connect(hook_db)
    with conn, conn.cursor() as cur:
        cur.execute("UPDATE ingest_checkpoints SET updated_at = now() - interval '2 hours'")
    conn.close()
    proc = status(tmp_path, hook_db, directory, time.monotonic() - start)
    assert proc.returncode == 1, proc.stdout
    assert states(proc)["ingester"] == "WARNING"
    assert [n for n, st in states(proc).items() if st != "OK"] == ["ingester"]

    # the hook disabled: critical
    pbsctl.qmgr(f"set hook {HOOK} enabled = false")
    proc = status(tmp_path, hook_db, directory, time.monotonic() - start)
    assert proc.returncode == 2, proc.stdout
    assert states(proc)["hook"] == "CRITICAL"
    assert "DISABLED" in json.loads(proc.stdout)["checks"][0]["summary"]
    nagios = status(tmp_path, hook_db, directory, time.monotonic() - start, form="--nagios")
    assert nagios.returncode == 2 and nagios.stdout.startswith("SOFTWALLTIME CRITICAL - hook")


def test_status_database_down(install, hook_db, jobs, tmp_path):
    start = time.monotonic()
    nodb = tmp_path / "nodb"
    nodb.mkdir()
    down = f"postgresql://hook@/softwalltime?host={nodb}&port=5432"
    install(dsn=down, connect_timeout_s=0.5)
    directory = tmp_path / "accounting"
    directory.mkdir()
    jobs.append(pbsctl.qsub("-h -l walltime=10:00:00"))
    assert pbsctl.resource(jobs[0], "soft_walltime") is None  # failed open
    proc = status(tmp_path, down, directory, time.monotonic() - start)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    st = states(proc)
    assert st["database"] == "CRITICAL" and st["hook"] == "OK" and st["config"] == "OK"
    # the job the hook left unchanged: 1 failure of 1 event, too few for a rate: a warning
    assert st["activity"] == "WARNING"
    activity = next(c for c in json.loads(proc.stdout)["checks"] if c["name"] == "activity")
    assert activity["details"]["failures"] == {"DatabaseError": 1}
    assert "too few for a rate" in activity["summary"]


def test_status_unknown_when_pbs_cannot_be_asked(hook_db, tmp_path):
    """Nagios: a check that cannot run is UNKNOWN (3), not CRITICAL. The hook is named
    after no hook that ever ran here: the failures other tests left in the server log's last
    hour (database down or silent) belong to other hooks and must not make it CRITICAL."""
    cfg = tmp_path / "status.json"
    cfg.write_text(json.dumps({"pbs_exec": str(tmp_path / "nopbs"), "dsn": hook_db}))
    proc = subprocess.run(
        [SOFTWALLTIME, "--config", str(cfg), "status", "--nagios", "--hook", "swt_never_ran"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert proc.stdout.startswith("SOFTWALLTIME UNKNOWN - hook UNKNOWN: cannot ask PBS")
