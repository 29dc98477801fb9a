"""The outputs of ``softwalltime status``: a table for a person, one Nagios line with
perfdata, JSON, and Prometheus's text exposition format."""

from __future__ import annotations

import json
import math
import re
import time
from typing import Optional, Sequence

from .judge import (
    _RANK,
    ALWAYS,
    CRITICAL,
    HOOK_EVENTS,
    OK,
    STATE_NAMES,
    UNKNOWN,
    WARNING,
    Check,
    Metric,
    _counters,
    overall,
)

# ------------------------------------------------------------------------------ output

_COLORS = {OK: "\033[32m", WARNING: "\033[33m", CRITICAL: "\033[31m", UNKNOWN: "\033[35m"}


def render_table(checks: Sequence[Check], color: bool) -> str:
    width = max(len(c.name) for c in checks) if checks else 0
    lines = []
    for c in checks:
        state = STATE_NAMES[c.state]
        if color:
            state = f"{_COLORS[c.state]}{state:<8}\033[0m"
        else:
            state = f"{state:<8}"
        lines.append(f"{c.name:<{width}}  {state} {c.summary}")
    verdict = STATE_NAMES[overall(checks)]
    lines.append(f"softwalltime status: {verdict}")
    return "\n".join(lines)


def render_json(checks: Sequence[Check]) -> str:
    return json.dumps(
        {
            "status": STATE_NAMES[overall(checks)],
            "exit_code": overall(checks),
            "checks": [
                {
                    "name": c.name,
                    "state": STATE_NAMES[c.state],
                    "summary": c.summary,
                    "details": c.details,
                    "metrics": {_metric_key(m): _json_number(m.value) for m in c.metrics},
                }
                for c in checks
            ],
        },
        indent=2,
        sort_keys=False,
    )


def _json_number(value: float) -> Optional[float]:
    """A value for JSON, which has no NaN: null."""
    return None if isinstance(value, float) and math.isnan(value) else value


def _metric_key(m: Metric) -> str:
    if not m.labels:
        return m.name
    return m.name + "{" + ",".join(f'{k}="{v}"' for k, v in sorted(m.labels.items())) + "}"


def _label_value(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def prometheus_value(value: float) -> str:
    """A sample value at full precision: ``int`` as is, ``float`` by ``repr`` (the shortest
    text that reads back as the same float), never ``%g`` (6 digits: 1700153660 would be
    ``1.70015e+09``, 3,660 s off)."""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


def render_prometheus(checks: Sequence[Check], now: Optional[float] = None) -> str:
    """The text exposition format, for node_exporter's textfile collector.

    The names ending in ``_total`` are counters (the hook's events since local midnight,
    reset with the server's daily log); every other is a gauge: the state when the command
    ran or a count over the ``--since`` window. Times are in seconds, sizes in bytes, shares
    as ratios (0 to 1). Every series of :data:`ALWAYS` is written on every run: NaN when its
    check could not gather it, 0 for an ``_up`` gauge.
    """
    states = "0 OK, 1 warning, 2 critical, 3 unknown (the check could not run)"
    ran = time.time() if now is None else now
    out = [
        f"# HELP softwalltime_status overall state: {states}",
        "# TYPE softwalltime_status gauge",
        f"softwalltime_status {overall(checks)}",
        f"# HELP softwalltime_check_state state per check: {states}",
        "# TYPE softwalltime_check_state gauge",
    ]
    out += [f'softwalltime_check_state{{check="{c.name}"}} {c.state}' for c in checks]
    out += [
        "# HELP softwalltime_status_timestamp_seconds when softwalltime status ran (Unix time)",
        "# TYPE softwalltime_status_timestamp_seconds gauge",
        f"softwalltime_status_timestamp_seconds {prometheus_value(ran)}",
    ]
    by_name: dict[str, list[Metric]] = {}
    for c in checks:
        for m in c.metrics:
            by_name.setdefault(m.name, []).append(m)
    for name, (text, missing) in ALWAYS.items():
        if name not in by_name:
            by_name[name] = [Metric(name, missing, text)]
    by_name.setdefault(HOOK_EVENTS, _counters(None))
    for name, metrics in by_name.items():
        out.append(f"# HELP {name} {_help_text(metrics[0].help)}")
        out.append(f"# TYPE {name} {'counter' if name.endswith('_total') else 'gauge'}")
        for m in metrics:
            labels = ",".join(f'{k}="{_label_value(v)}"' for k, v in sorted(m.labels.items()))
            value = prometheus_value(m.value)
            out.append(f"{name}{{{labels}}} {value}" if labels else f"{name} {value}")
    return "\n".join(out) + "\n"


def _help_text(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def _perf_label(m: Metric) -> str:
    name = m.name.removeprefix("softwalltime_")
    for _key, value in sorted(m.labels.items()):
        name += "_" + re.sub(r"[^A-Za-z0-9_.-]+", "_", value)
    return name


def perf_number(value: float, timestamp: bool = False) -> str:
    """A perfdata number with sane digits: integers as they are, a time stamp to the
    second, 3 decimals from 1 up, 3 significant digits below; ``U`` for NaN (the plugin
    guidelines' "undetermined")."""
    if isinstance(value, bool) or isinstance(value, int):
        return str(int(value))
    if math.isnan(value) or math.isinf(value):
        return "U"
    if timestamp or value == int(value):
        return str(int(round(value)))
    if abs(value) >= 1:
        return f"{value:.3f}".rstrip("0").rstrip(".")
    return f"{value:.3g}"


def _perf_value(m: Metric) -> str:
    """``value[unit];[warn];[crit]`` (units s, B, c for a counter)."""
    stamp = m.name.endswith("_timestamp_seconds")
    unit = ""
    if m.name.endswith("_seconds") and not stamp:
        unit = "s"
    elif m.name.endswith("_bytes"):
        unit = "B"
    elif m.name.endswith("_total"):
        unit = "c"
    text = perf_number(m.value, stamp) + unit
    if m.warn is not None or m.crit is not None:
        limits = [m.warn, m.crit]
        text += "".join(";" + ("" if v is None else perf_number(v)) for v in limits).rstrip(";")
    return text


# A check's text in the Nagios line is cut to this many characters (the whole in --json).
NAGIOS_SUMMARY_CHARS = 120


def render_nagios(checks: Sequence[Check]) -> str:
    """One line for Nagios/Icinga: ``SOFTWALLTIME STATE - text | perfdata``.

    The text names the checks that are not OK, worst first (all of them OK: how many);
    checks that say the same (the database down: ingester and history) are named once, and
    each text is cut to :data:`NAGIOS_SUMMARY_CHARS`. The perfdata are the metrics,
    ``label=value[unit][;warn;crit]`` (s, B, c), in the plugin guidelines' form.
    """
    state = overall(checks)
    bad = sorted((c for c in checks if c.state != OK), key=lambda c: -_RANK[c.state])
    if bad:
        said: dict[tuple[int, str], list[str]] = {}
        for c in bad:
            said.setdefault((c.state, _cut(c.summary)), []).append(c.name)
        text = "; ".join(
            f"{', '.join(names)} {STATE_NAMES[st]}: {summary}"
            for (st, summary), names in said.items()
        )
    else:
        text = f"{len(checks)} checks OK: " + ", ".join(c.name for c in checks)
    text = " ".join(text.replace("|", "/").split())
    perf = [f"status={state}"]
    perf += [f"{_perf_label(m)}={_perf_value(m)}" for c in checks for m in c.metrics]
    return f"SOFTWALLTIME {STATE_NAMES[state]} - {text} | {' '.join(perf)}"


def _cut(text: str) -> str:
    text = " ".join(text.replace("|", "/").split())
    if len(text) <= NAGIOS_SUMMARY_CHARS:
        return text
    return text[: NAGIOS_SUMMARY_CHARS - 1] + "…"
