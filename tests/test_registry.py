"""The one registry of predictors and ranks (softwalltime/core/registry.py, issue 51): every
list of them is read from it, and the docs' table says what it says."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from softwalltime.cli import build_parser
from softwalltime.cli import simulate as cli_simulate
from softwalltime.core import config, predict, registry
from softwalltime.errors import ConfigError
from softwalltime.replay import evaluate, pbsched, sources

DOCS = Path(__file__).resolve().parents[1] / "docs"


def _choices(*command: str) -> dict[str, tuple[str, ...]]:
    """The choices of each option of ``softwalltime COMMAND``, by option string."""
    parser = build_parser()
    for name in command:
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = sub.choices[name]
    return {
        opt: tuple(action.choices)
        for action in parser._actions
        if action.choices and not isinstance(action, argparse._SubParsersAction)
        for opt in action.option_strings
    }


def test_every_list_of_predictors_is_the_registry():
    assert registry.PREDICTORS == ("v1", "v2", "v3", "calibrated", "learned")
    assert config.PREDICTORS == evaluate.PREDICTORS == registry.PREDICTORS
    assert predict.PREDICTORS == registry.HISTORY_PREDICTORS == ("v1", "v2", "v3")
    assert evaluate.TARGETED == registry.TARGETED == ("calibrated", "learned")
    assert evaluate.DEFAULT_PREDICTORS == ("v1", "v2", "v3", "calibrated")
    assert sources.SOURCE_NAMES == cli_simulate.SOURCES
    assert sources.SOURCE_NAMES[1:-2] == registry.PREDICTORS
    assert _choices("predict")["--predictor"] == registry.PREDICTORS
    assert set(_choices("eval-start")["--estimates"]) == set(registry.SIMULATED) - {"perfect"}


def test_every_list_of_ranks_is_the_registry():
    assert registry.RANKS == ("key-mean", "key-mean-paid", "learned", "learned-paid")
    assert config.RANKS == ("off",) + registry.RANKS
    assert pbsched.RANK_BY == cli_simulate.RANK_BY == registry.RANKS
    assert _choices("simulate")["--rank-by"] == registry.RANKS


def _settings(tmp_path, **overrides) -> config.Settings:
    path = tmp_path / "softwalltime.json"
    path.write_text("{}")
    return config.load_settings(str(path), environ={}, overrides=overrides)


@pytest.mark.parametrize("name", registry.PREDICTORS)
def test_the_setting_takes_every_predictor(tmp_path, name):
    assert _settings(tmp_path, predictor=name).predictor == name
    assert _settings(tmp_path).predictor == registry.DEFAULT_PREDICTOR == "v3"


def test_the_setting_refuses_another_predictor(tmp_path):
    with pytest.raises(ConfigError, match="must be one of v1, v2, v3, calibrated, learned"):
        _settings(tmp_path, predictor="v4")


@pytest.mark.parametrize("rank", registry.RANK_TABLE, ids=lambda r: r.name)
def test_a_rank_needs_its_predictor(tmp_path, rank):
    assert _settings(tmp_path, rank=rank.name, predictor="learned").rank == rank.name
    if rank.predictor is None:
        assert _settings(tmp_path, rank=rank.name, predictor="v1").rank == rank.name
    else:
        with pytest.raises(ConfigError, match=f"rank {rank.name} needs predictor learned"):
            _settings(tmp_path, rank=rank.name, predictor="v1")


def _table(path: Path, heading: str) -> list[list[str]]:
    """The cells of the first table after ``heading`` in a markdown page."""
    text = path.read_text().split(heading, 1)[1]
    rows = []
    for line in text.splitlines():
        if line.startswith("|"):
            rows.append([c.strip() for c in line.strip("|").split("|")])
        elif rows:
            break
    return rows[2:]  # past the header and its rule


def test_the_docs_table_lists_the_registry():
    """docs/hook.md's table of predictors: a row per predictor, in the registry's order, the
    default marked."""
    names = [row[0] for row in _table(DOCS / "hook.md", "## Predictors")]
    expected = [
        f"`{p}` (default)" if p == registry.DEFAULT_PREDICTOR else f"`{p}`"
        for p in registry.PREDICTORS
    ]
    assert names == expected


def test_the_settings_page_names_every_predictor_and_rank():
    rows = {row[0]: row for row in _table(DOCS / "settings.md", "| file key |")}
    predictor, rank = rows["`predictor`"], rows["`rank`"]
    assert predictor[2] == f"`{registry.DEFAULT_PREDICTOR}`"
    assert re.findall(r"`([\w-]+)`", predictor[3].split("(")[0]) == list(registry.PREDICTORS)
    assert rank[2] == f"`{registry.RANK_OFF}`"
    assert all(f"`{name}`" in rank[3] for name in registry.RANKS)
