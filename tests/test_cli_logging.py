"""How the commands log: warnings and errors by default, --quiet and --verbose, the command's
name under systemd and the journal's priority prefix; global options after the command."""

import os
import subprocess
import sys
import textwrap

import pytest

from softwalltime import cli
from softwalltime.cli import logs

# A command that logs one line at each level and prints a summary, run through cli.run as
# every console script is (in a fresh interpreter: logging is configured once per process).
_SCRIPT = textwrap.dedent(
    """
    import argparse, logging, sys
    from softwalltime import cli

    def handler(args, settings):
        log = logging.getLogger("softwalltime.demo")
        log.debug("a debug line")
        log.info("an info line")
        log.warning("a warning line")
        log.error("an error line")
        print("the summary")
        if args.fail:
            from softwalltime.errors import SoftwalltimeError
            raise SoftwalltimeError("it failed")
        return 0

    def build():
        parser = argparse.ArgumentParser(prog="softwalltime-demo")
        cli.add_global_options(parser)
        parser.add_argument("--fail", action="store_true")
        parser.add_argument("--json", action="store_true")
        parser.set_defaults(func=handler)
        return parser

    sys.exit(cli.run(build, sys.argv[1:], "softwalltime-demo"))
    """
)


def _env(**extra):
    env = {k: v for k, v in os.environ.items() if k not in ("INVOCATION_ID", "JOURNAL_STREAM")}
    return env | extra


def _demo(*argv, env=None, stderr=subprocess.PIPE):
    return subprocess.run(
        [sys.executable, "-c", _SCRIPT, *argv],
        stdout=subprocess.PIPE,
        stderr=stderr,
        text=True,
        env=env or _env(),
        timeout=60,
    )


def test_default_is_warnings_and_errors_in_one_line_form():
    done = _demo()
    assert done.returncode == 0
    assert done.stdout == "the summary\n"
    assert done.stderr.splitlines() == [
        "softwalltime-demo: warning: a warning line",
        "softwalltime-demo: error: an error line",
    ]


def test_verbose_adds_info_and_debug_adds_debug_with_the_logger_name():
    assert "softwalltime-demo: info: an info line" in _demo("--verbose").stderr
    debug = _demo("--debug").stderr
    assert "softwalltime-demo: debug: softwalltime.demo: a debug line" in debug
    assert "softwalltime-demo: info: softwalltime.demo: an info line" in debug


def test_quiet_prints_errors_only_and_no_summary_unless_asked():
    done = _demo("--quiet")
    assert done.returncode == 0
    assert done.stdout == ""
    assert done.stderr.splitlines() == ["softwalltime-demo: error: an error line"]
    assert _demo("--quiet", "--json").stdout == "the summary\n"
    failed = _demo("--quiet", "--fail")
    assert failed.returncode == 1
    assert failed.stderr.splitlines()[-1] == "softwalltime-demo: error: it failed"


def test_under_systemd_lines_name_the_command():
    done = _demo(env=_env(INVOCATION_ID="0123abcd"))
    # no subcommand here: the program's name; softwalltime's commands add theirs (below)
    assert done.stderr.splitlines()[0] == "softwalltime-demo: warning: a warning line"
    parser = cli.build_parser()
    env = {"INVOCATION_ID": "0123abcd"}
    for argv, ident in (
        (["db", "prune"], "softwalltime-db-prune"),
        (["refresh", "--dry-run"], "softwalltime-refresh"),
        (["hooks", "install"], "softwalltime-hooks-install"),
    ):
        assert logs.identifier("softwalltime", parser.parse_args(argv), env) == ident
    assert logs.identifier("softwalltime", parser.parse_args(["db", "prune"]), {}) == "softwalltime"


def test_on_the_journal_stream_each_line_carries_its_syslog_priority(tmp_path):
    path = tmp_path / "stderr"
    with open(path, "w") as fh:
        st = os.fstat(fh.fileno())
        journal = f"{st.st_dev}:{st.st_ino}"
        done = _demo("--fail", env=_env(JOURNAL_STREAM=journal), stderr=fh)
    assert done.returncode == 1
    assert path.read_text().splitlines() == [
        "<4>softwalltime-demo: warning: a warning line",
        "<3>softwalltime-demo: error: an error line",
        "<3>softwalltime-demo: error: it failed",
    ]
    # another stream than the one systemd connected (a redirect): no prefix
    done = _demo(env=_env(JOURNAL_STREAM=journal))
    assert not any(line.startswith("<") for line in done.stderr.splitlines())


@pytest.mark.parametrize(
    "argv",
    [
        ["--dsn", "postgresql://nobody@127.0.0.1:1/x", "db", "current"],
        ["db", "current", "--dsn", "postgresql://nobody@127.0.0.1:1/x"],
        ["--dsn", "postgresql://other@127.0.0.1:1/y", "db", "current", "--dsn",
         "postgresql://nobody@127.0.0.1:1/x"],
    ],
)  # fmt: skip
def test_global_options_before_or_after_the_command(capsys, argv):
    code = cli.main(argv)
    err = capsys.readouterr().err
    assert code == 1
    assert "softwalltime: error: cannot connect to PostgreSQL at nobody@127.0.0.1:1/x" in err


def test_a_global_option_after_the_command_does_not_undo_one_before():
    parser = cli.build_parser()
    args = parser.parse_args(["--config", "/etc/x.json", "--debug", "status", "--json"])
    assert (args.config, args.debug, args.json) == ("/etc/x.json", True, True)
    args = parser.parse_args(["status", "--config", "/etc/y.json", "--quiet"])
    assert (args.config, args.quiet, args.debug) == ("/etc/y.json", True, False)
    # refresh's own --verbose (a line per job) is still its own, and raises the level too
    args = parser.parse_args(["refresh", "--verbose"])
    assert args.verbose is True


def test_quiet_keeps_what_was_asked_for_on_stdout():
    parser = cli.build_parser()
    for argv in (
        ["--quiet", "status", "--nagios"],
        ["--quiet", "status", "--prometheus", "-"],
        ["--quiet", "report", "--out", "-"],
        ["db", "grant", "--print", "--quiet"],
        ["--quiet", "ingest", "--print-cron"],
        ["--quiet", "db", "current", "--json"],
    ):
        assert logs.asked_for_stdout(parser.parse_args(argv)), argv
    for argv in (["--quiet", "refresh"], ["--quiet", "status", "--prometheus", "/x.prom"]):
        assert not logs.asked_for_stdout(parser.parse_args(argv)), argv


def test_level_precedence():
    assert logs.level_of(set()) == logs.logging.WARNING
    assert logs.level_of({"--quiet"}) == logs.logging.ERROR
    assert logs.level_of({"--quiet", "--verbose"}) == logs.logging.INFO
    assert logs.level_of({"--verbose", "--debug"}) == logs.logging.DEBUG


def test_ingest_errors_have_the_one_line_form(fresh_dsn, tmp_path):
    """docs/troubleshoot.md: an ingest error is 'softwalltime-ingest: error: ...', as every
    command's; not the logger's 'ERROR softwalltime_ingest.run: ...'."""
    missing = tmp_path / "20261122"
    done = subprocess.run(
        [sys.executable, "-m", "softwalltime_ingest", "--dsn", fresh_dsn, str(missing)],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=120,
    )
    assert done.returncode == 1
    errors = [line for line in done.stderr.splitlines() if ": error: " in line]
    assert errors and all(line.startswith("softwalltime-ingest: error: ") for line in errors)
    assert f"{missing}: " in errors[0]
