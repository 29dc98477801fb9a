"""The repository stands alone (issue 49): the data the tests, benchmarks and docs read is in
it, and nothing a developer runs names a folder beside the clone."""

from __future__ import annotations

import gzip
import re
import subprocess
from pathlib import Path

from helpers_data import DATA, EXAMPLES, PBS_SAMPLES, TRACES

REPO = Path(__file__).resolve().parents[1]
# .ci/run may point OPENPBS_TARBALL at CI's cached tarball beside the clone: its one such line.
BESIDE = re.compile(r"\.\./shared")  # the folder CI lays beside the clone
CI_CACHE_LINE = re.compile(r"openpbs-23\.06\.06\.tar\.gz")


def _tracked(*paths: str) -> list[Path]:
    out = subprocess.run(
        ["git", "-C", str(REPO), "ls-files", "-z", "--", *paths],
        capture_output=True,
        check=True,
    ).stdout
    return [REPO / name for name in out.decode().split("\0") if name]


def test_nothing_names_a_folder_beside_the_clone():
    files = _tracked("tests", "Makefile", "docs", "README.md", ".ci")
    assert len(files) > 100
    offenders = []
    for path in files:
        if path.suffix in {".gz", ".so"}:
            continue
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if BESIDE.search(line) and not (
                path.parent.name == ".ci" and CI_CACHE_LINE.search(line)
            ):
                offenders.append(f"{path.relative_to(REPO)}:{number}: {line.strip()}")
    assert offenders == []


def test_every_data_file_is_tracked_and_described():
    sources = (DATA / "SOURCES.md").read_text()
    files = sorted(p for p in DATA.rglob("*") if p.is_file() and p.name != "SOURCES.md")
    assert {p.name for p in files} >= {
        "KTH-SP2-1996-2.1-cln.swf.gz",
        "CTC-SP2-1996-3.1-cln.swf.gz",
        "HPC2N-2002-2.2-cln.swf.gz",
        "openpbs-23.06-local.log",
        EXAMPLES.name,
    }
    assert set(_tracked("tests/data")) >= set(files)
    undescribed = [p.name for p in files if f"`{p.name}`" not in sources]
    # the .machines file is described beside its trace
    assert undescribed == ["CERIT-SC-wagap-2013.alea.swf.machines"]


def test_the_traces_are_whole_gzip_files_of_swf_lines():
    traces = sorted(TRACES.glob("*.swf.gz"))
    assert len(traces) == 8
    for path in traces:
        with gzip.open(path, "rt") as f:
            jobs = sum(1 for line in f if line.strip() and not line.startswith(";"))
        assert jobs > 10_000, path.name
    assert len(list(PBS_SAMPLES.glob("*.log"))) == 8
