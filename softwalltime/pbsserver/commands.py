"""Run PBS's own commands (``qstat -f -F json``, ``qalter``, ``qmgr``) and read their output.

One runner, :class:`Pbs`, for every command the product runs: ``hooks install`` and
``uninstall``, ``status``, ``refresh`` and ``wait``. Where a command is, in one order
(:meth:`Pbs.path`): ``bin/`` of the ``pbs_exec`` setting; else, with a prefix (the commands
run where it takes them: nothing to look for here), ``bin/`` of ``PBS_EXEC`` of
``/etc/pbs.conf`` or of ``/opt/pbs``; else the command on ``PATH``, else that ``bin/``.
``pbs_command_prefix`` is put in front of every command (for example a source checkout's
``["tests/pbs/server/pbsx"]`` where PBS lives in a network namespace, or ``["sudo", "-n"]``).
Each command has a time limit: the runner's (120 s), or one a call gives (``hooks``: 60 s
per ``qmgr``).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

from ..core.config import Settings, load_settings
from ..errors import ConfigError, SoftwalltimeError

PBS_CONF = "/etc/pbs.conf"
DEFAULT_PBS_EXEC = "/opt/pbs"


class PbsError(SoftwalltimeError):
    """A PBS command could not run or failed as a whole."""


def read_pbs_conf(path: str = PBS_CONF) -> dict[str, str]:
    """``KEY=VALUE`` lines of ``/etc/pbs.conf`` (empty if the file is missing)."""
    out: dict[str, str] = {}
    try:
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                key, sep, value = line.strip().partition("=")
                if sep and key and not key.startswith("#"):
                    out[key.strip()] = value.strip()
    except OSError:
        pass
    return out


@dataclass(frozen=True)
class Pbs:
    """Where PBS's commands and files are, and how to run them.

    :param exec_dir: PBS_EXEC (commands in ``bin/``, ``sbin/``)
    :param home: PBS_HOME (``server_logs/``, ``server_priv/``)
    :param prefix: argv put before every command
    :param timeout_s: limit for one command, unless a call gives its own
    :param qmgr: the qmgr to run instead of ``bin/qmgr`` (``hooks --qmgr``), or ""
    :param search_path: look for each command on ``PATH`` before ``exec_dir`` (no
        ``pbs_exec`` setting and no prefix)
    """

    exec_dir: str = DEFAULT_PBS_EXEC
    home: str = "/var/spool/pbs"
    prefix: tuple[str, ...] = ()
    timeout_s: float = 120.0
    qmgr: str = ""
    search_path: bool = False

    @classmethod
    def from_settings(cls, settings: Any, conf: Mapping[str, str] | None = None) -> Pbs:
        conf = read_pbs_conf() if conf is None else conf
        prefix = tuple(settings.pbs_command_prefix)
        return cls(
            exec_dir=settings.pbs_exec or conf.get("PBS_EXEC") or DEFAULT_PBS_EXEC,
            home=conf.get("PBS_HOME") or "/var/spool/pbs",
            prefix=prefix,
            search_path=not settings.pbs_exec and not prefix,
        )

    def path(self, command: str) -> str:
        """Where ``command`` is: the qmgr given, else (``search_path``) the command on
        ``PATH``, else ``bin/`` of PBS_EXEC."""
        if command == "qmgr" and self.qmgr:
            return self.qmgr
        found = shutil.which(command) if self.search_path else None
        return found or os.path.join(self.exec_dir, "bin", command)

    def argv(self, command: str, *args: str) -> list[str]:
        return [*self.prefix, self.path(command), *args]

    def run(
        self,
        command: str,
        *args: str,
        stdin: str | None = None,
        timeout_s: float | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """Run one PBS command; its exit status is the caller's to judge.

        :param timeout_s: this call's limit (default: the runner's)
        :raises PbsError: the command cannot be started or does not finish in time
        """
        argv = self.argv(command, *args)
        limit = self.timeout_s if timeout_s is None else timeout_s
        try:
            return subprocess.run(
                argv,
                input=stdin,
                capture_output=True,
                text=True,
                check=False,
                timeout=limit,
            )
        except OSError as err:
            if isinstance(err, FileNotFoundError) and not self.prefix:
                if not os.path.exists(argv[0]):
                    raise PbsError(
                        f"{argv[0]}: not found (set pbs_exec or PBS_EXEC in {PBS_CONF})"
                    ) from None
            program = shlex.join(argv[: len(self.prefix) + 1])
            raise PbsError(f"cannot run {program}: {err.strerror}") from None
        except subprocess.TimeoutExpired:
            shown = shlex.join([command, *args])
            raise PbsError(f"{shown} did not finish within {limit:g} s") from None

    def check(self, command: str, *args: str) -> str:
        """Run a command that must succeed; its stdout.

        :raises PbsError: it failed (the message carries its first error line)
        """
        proc = self.run(command, *args)
        if proc.returncode != 0:
            detail = " ".join((proc.stderr or proc.stdout or "").split()) or "no output"
            raise PbsError(f"{command} {' '.join(args)}: exit {proc.returncode}: {detail}")
        return proc.stdout

    def jobs(self, extra: Sequence[str] = ()) -> dict[str, Any]:
        """``qstat -f -F json`` of every job: job id -> its attributes.

        Never with job ids: OpenPBS 23.06's qstat asks for each given id in turn and took
        about 50 s for 200 ids, against 0.3 s for all of 1,000 jobs at once.

        :raises PbsError: qstat failed or printed something that is not JSON
        """
        return parse_qstat_json(self.check("qstat", "-f", "-F", "json", *extra))

    def sched(self, name: str = "default") -> dict[str, str]:
        """The scheduler's attributes that are set (``qmgr -c 'list sched NAME'``); one
        left at its default is absent.

        :raises PbsError: qmgr failed
        """
        return parse_qmgr_list(self.check("qmgr", "-c", f"list sched {name}"))


def chunks(items: Sequence[str], size: int) -> Iterable[Sequence[str]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def parse_qmgr_list(text: str) -> dict[str, str]:
    """``qmgr -c 'list ...'`` of one object -> {attribute: value}. qmgr folds a long value
    after a comma onto lines that start with a tab; they are joined back.
    """
    out: dict[str, str] = {}
    key = ""
    for line in text.splitlines():
        if line.startswith("\t") and key:
            out[key] += line.strip()
            continue
        name, sep, value = line.strip().partition(" = ")
        key = name.strip() if sep else ""
        if key:
            out[key] = value.strip()
    return out


def parse_qstat_json(text: str) -> dict[str, Any]:
    """The ``Jobs`` object of ``qstat -f -F json`` output (``{}`` when there are none).

    :raises PbsError: not JSON, or not the shape qstat prints
    """
    try:
        # qstat 23.06 prints bare backslashes in some strings (e.g. Windows-style paths)
        data = json.loads(text, strict=False)
    except ValueError as err:
        raise PbsError(f"qstat -F json printed something that is not JSON: {err}") from None
    if not isinstance(data, dict):
        raise PbsError("qstat -F json: expected an object at top level")
    jobs = data.get("Jobs") or {}
    if not isinstance(jobs, dict):
        raise PbsError("qstat -F json: 'Jobs' is not an object")
    return jobs


def exported_settings(text: str, label: str) -> Settings:
    """The settings of a hook configuration ``text`` (what ``qmgr -c 'export hook NAME
    application/x-config default'`` prints), loaded as the hook loads its file: with the
    same loader, from a file, without the environment.

    :raises ConfigError: the configuration is invalid; the message calls it ``label``
    """
    fd, path = tempfile.mkstemp(prefix="softwalltime-hook-", suffix=".json")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        try:
            return load_settings(path, environ={})
        except ConfigError as err:
            raise ConfigError(str(err).replace(path, label)) from None
    finally:
        os.unlink(path)
