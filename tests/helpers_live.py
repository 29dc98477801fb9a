"""Accounting lines of one job's life, as OpenPBS 23.06 writes them (the real server's
Q, S, E and D layouts), for the live-state tests of the ingester and ``wait``."""

from __future__ import annotations

import time

SERVER = "pbshost"


def _date(epoch: int) -> str:
    return time.strftime("%m/%d/%Y %H:%M:%S", time.gmtime(epoch))


def _job(n: int, user: str, ncpus: int, walltime: str, ctime: int, soft: str | None) -> str:
    res = f"Resource_List.ncpus={ncpus} Resource_List.nodect=1 Resource_List.place=pack"
    res += f" Resource_List.select=1:ncpus={ncpus}"
    if soft:
        res += f" Resource_List.soft_walltime={soft}"
    return (
        f"user={user} group={user} project=_pbs_project_default jobname=STDIN queue=workq"
        f" ctime={ctime} qtime={ctime} etime={ctime} {res} Resource_List.walltime={walltime}"
    )


def q_line(n: int, ctime: int, user: str = "alice", ncpus: int = 1, walltime: str = "01:00:00",
           soft: str | None = None) -> str:  # fmt: skip
    return f"{_date(ctime)};Q;{n}.{SERVER};{_job(n, user, ncpus, walltime, ctime, soft)} \n"


def s_line(n: int, ctime: int, start: int, user: str = "alice", ncpus: int = 1,
           walltime: str = "01:00:00", soft: str | None = None) -> str:  # fmt: skip
    job = _job(n, user, ncpus, walltime, ctime, soft).replace(
        " Resource_List.ncpus",
        f" start={start} exec_host={SERVER}/0*{ncpus}"
        f" exec_vnode=({SERVER}:ncpus={ncpus}) Resource_List.ncpus",
        1,
    )
    return f"{_date(start)};S;{n}.{SERVER};{job} resource_assigned.ncpus={ncpus} \n"


def e_line(n: int, ctime: int, start: int, end: int, user: str = "alice", ncpus: int = 1,
           walltime: str = "01:00:00") -> str:  # fmt: skip
    job = _job(n, user, ncpus, walltime, ctime, None).replace(
        " Resource_List.ncpus",
        f" start={start} exec_host={SERVER}/0*{ncpus}"
        f" exec_vnode=({SERVER}:ncpus={ncpus}) Resource_List.ncpus",
        1,
    )
    used = time.strftime("%H:%M:%S", time.gmtime(end - start))
    return (
        f"{_date(end)};E;{n}.{SERVER};{job} session=1 end={end} Exit_status=0"
        f" resources_used.cput=00:00:00 resources_used.walltime={used} run_count=1\n"
    )


def r_line(n: int, ctime: int, start: int, end: int, user: str = "alice") -> str:
    return (
        e_line(n, ctime, start, end, user)
        .replace(";E;", ";R;")
        .replace("Exit_status=0", "Exit_status=-11")
    )


def d_line(n: int, at: int) -> str:
    return f"{_date(at)};D;{n}.{SERVER};requestor=root@{SERVER}\n"
