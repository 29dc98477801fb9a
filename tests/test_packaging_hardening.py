"""Issue 32 item 3: every unit is sandboxed, the root one too (status runs as root: PBS shows
hook data to root only; refresh runs as the service user after a root-only step that hands
it the hook's data), and ``systemd-analyze security --offline`` scores each at most 3.0 (a
skip locally without systemd-analyze, a failure in CI)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from helpers_runtime import skip_or_fail
from test_packaging import unit

from softwalltime.pbsserver.refresh import DEFAULT_HOOK_FILE, DEFAULT_LOCK

PKG = Path(__file__).resolve().parents[1] / "packaging" / "systemd"
SERVICES = sorted(PKG.glob("*.service"))
# What a unit may keep: resvport's privileged port (PBS's client authentication: refresh's
# user binds it itself, since NoNewPrivileges stops the setuid pbs_iff); status (root) also
# writes into node_exporter's folder and reads PBS_HOME whoever owns them.
USER_CAPS = {"softwalltime-refresh.service": {"CAP_NET_BIND_SERVICE"}}
ROOT_CAPS = {
    "softwalltime-wait-publish.service": {"CAP_NET_BIND_SERVICE"},
    "softwalltime-status.service": {
        "CAP_NET_BIND_SERVICE",
        "CAP_DAC_OVERRIDE",
        "CAP_DAC_READ_SEARCH",
    },
}
HARDENING = {
    "NoNewPrivileges": "yes",
    "ProtectSystem": "strict",
    "PrivateTmp": "yes",
    "PrivateDevices": "yes",
    "ProtectKernelTunables": "yes",
    "ProtectKernelModules": "yes",
    "ProtectKernelLogs": "yes",
    "ProtectControlGroups": "yes",
    "ProtectClock": "yes",
    "ProtectHostname": "yes",
    "RestrictNamespaces": "yes",
    "RestrictRealtime": "yes",
    "RestrictSUIDSGID": "yes",
    "LockPersonality": "yes",
    "SystemCallArchitectures": "native",
}
MAX_SCORE = 3.0


def test_the_services_are_the_four_known_ones():
    assert [p.name for p in SERVICES] == [
        "softwalltime-calibrate.service",
        "softwalltime-ingest.service",
        "softwalltime-prune.service",
        "softwalltime-refresh.service",
        "softwalltime-status.service",
        "softwalltime-wait-publish.service",
    ]


@pytest.mark.parametrize("path", SERVICES, ids=lambda p: p.name)
def test_every_service_is_sandboxed(path):
    u = unit(path)
    for key, value in HARDENING.items():
        assert u.get(key) == [value], (path.name, key)
    assert u["ProtectHome"][0] in ("yes", "read-only")
    families = set(" ".join(u["RestrictAddressFamilies"]).split())
    assert families <= {"AF_UNIX", "AF_INET", "AF_INET6", "AF_NETLINK"}, families
    assert "@system-service" in u["SystemCallFilter"]
    caps = set(" ".join(u["CapabilityBoundingSet"]).split())
    if "User" in u:
        assert u["User"] == ["softwalltime"]
        assert caps == USER_CAPS.get(path.name, set()), caps
        ambient = set(" ".join(u.get("AmbientCapabilities", [])).split())
        assert ambient == caps, ambient
        # a root-only step (+) only to hand over what PBS shows to root
        for line in u.get("ExecStartPre", []):
            assert not line.startswith("+") or "--export-hook" in line, line
    else:  # root: only what PBS needs
        assert caps == ROOT_CAPS[path.name], caps
        assert u["AmbientCapabilities"] == [""]


def test_refresh_has_its_lock_folder_and_status_may_write_its_metrics():
    refresh = unit(PKG / "softwalltime-refresh.service")
    assert f"/run/{refresh['RuntimeDirectory'][0]}" == str(Path(DEFAULT_LOCK).parent)
    assert Path(DEFAULT_HOOK_FILE).parent == Path(DEFAULT_LOCK).parent
    assert refresh["RuntimeDirectoryMode"] == ["0750"]  # writable by its user only
    assert [line.split()[-1] for line in refresh["ExecStartPre"] + refresh["ExecStart"]] == [
        DEFAULT_HOOK_FILE,
        DEFAULT_HOOK_FILE,
    ]
    status = unit(PKG / "softwalltime-status.service")
    default = status["Environment"][0].partition("=")[2]
    assert status["ReadWritePaths"] == [f"-{Path(default).parent}"]


@pytest.mark.parametrize("path", SERVICES, ids=lambda p: p.name)
def test_systemd_analyze_security_scores_at_most_3(path):
    if shutil.which("systemd-analyze") is None:
        skip_or_fail(
            "systemd-analyze is missing, so this cannot score the units", "apt-get install systemd"
        )
    proc = subprocess.run(
        ["systemd-analyze", "security", "--offline=true", "--no-pager", str(path)],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    m = re.search(r"Overall exposure level for \S+: (\d+\.\d)", proc.stdout)
    assert m, (proc.returncode, proc.stdout[-500:], proc.stderr[-500:])
    assert float(m.group(1)) <= MAX_SCORE, proc.stdout
