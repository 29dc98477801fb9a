"""Shell completion for bash and zsh, from the argparse definitions (as :mod:`.manpage` writes
the man pages): ``python -m softwalltime.cli.completion bash|zsh`` prints the script.

The packages install them as /usr/share/bash-completion/completions/softwalltime (and a link
for softwalltime-ingest) and /usr/share/zsh/vendor-completions/_softwalltime. Both scripts
hold the same tables, walked from the parsers of every console script: per command path
("softwalltime db"), its subcommands and options; per option that takes a value, its
choices, or files. Completing walks the words typed so far down the subcommands.
"""

from __future__ import annotations

import argparse
import shlex
import sys

from .manpage import console_scripts

Tables = tuple[dict[str, str], dict[str, str], dict[str, str]]


def tables(scripts: dict[str, argparse.ArgumentParser] | None = None) -> Tables:
    """(subcommands, options, values) by command path; values by "path option": its
    choices, or "" for a file or free value."""
    subs: dict[str, str] = {}
    opts: dict[str, str] = {}
    values: dict[str, str] = {}

    def walk(path: str, parser: argparse.ArgumentParser) -> None:
        names = []
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                subs[path] = " ".join(sorted(action.choices))
                for name, child in action.choices.items():
                    walk(f"{path} {name}", child)
            for flag in action.option_strings:
                names.append(flag)
                if action.nargs != 0:
                    choices = action.choices or ()
                    values[f"{path} {flag}"] = " ".join(str(c) for c in choices)
        opts[path] = " ".join(sorted(names))

    for name, parser in sorted((scripts or console_scripts()).items()):
        walk(name, parser)
    return subs, opts, values


def _assoc(shell: str, name: str, table: dict[str, str]) -> list[str]:
    """Assignments of ``table`` to the associative array ``name`` (zsh keeps a quoted
    subscript's quotes: pairs there)."""
    items = sorted(table.items())
    if shell == "zsh":
        return [f"{name}+=({shlex.quote(k)} {shlex.quote(v)})" for k, v in items]
    return [f"{name}[{shlex.quote(k)}]={shlex.quote(v)}" for k, v in items]


BASH_BODY = r"""
_softwalltime() {
    local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
    local cmd=${COMP_WORDS[0]##*/} i w
    for ((i = 1; i < COMP_CWORD; i++)); do
        w=${COMP_WORDS[i]}
        [[ $w == -* ]] && continue
        if [[ " ${_softwalltime_subs[$cmd]} " == *" $w "* ]]; then
            cmd="$cmd $w"
        fi
    done
    if [[ -n ${_softwalltime_values["$cmd $prev"]+x} ]]; then
        if [[ -n ${_softwalltime_values["$cmd $prev"]} ]]; then
            COMPREPLY=($(compgen -W "${_softwalltime_values["$cmd $prev"]}" -- "$cur"))
        else
            COMPREPLY=($(compgen -f -- "$cur"))
        fi
    elif [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "${_softwalltime_opts[$cmd]}" -- "$cur"))
    elif [[ -n ${_softwalltime_subs[$cmd]+x} ]]; then
        COMPREPLY=($(compgen -W "${_softwalltime_subs[$cmd]}" -- "$cur"))
    else
        COMPREPLY=($(compgen -f -- "$cur"))
    fi
}
complete -o filenames -F _softwalltime softwalltime softwalltime-ingest
"""

ZSH_BODY = r"""
_softwalltime() {
    local cmd=${words[1]:t} i w prev=${words[CURRENT-1]}
    for (( i = 2; i < CURRENT; i++ )); do
        w=${words[i]}
        [[ $w == -* ]] && continue
        [[ " ${_softwalltime_subs[$cmd]} " == *" $w "* ]] && cmd="$cmd $w"
    done
    if (( ${+_softwalltime_values[$cmd $prev]} )); then
        if [[ -n ${_softwalltime_values[$cmd $prev]} ]]; then
            compadd -- ${=_softwalltime_values[$cmd $prev]}
        else
            _files
        fi
    elif [[ ${words[CURRENT]} == -* ]]; then
        compadd -- ${=_softwalltime_opts[$cmd]}
    elif (( ${+_softwalltime_subs[$cmd]} )); then
        compadd -- ${=_softwalltime_subs[$cmd]}
    else
        _files
    fi
}
_softwalltime "$@"
"""


def script(shell: str, scripts: dict[str, argparse.ArgumentParser] | None = None) -> str:
    """The completion script for ``shell`` (bash or zsh)."""
    subs, opts, values = tables(scripts)
    head = {
        "bash": "# bash completion for softwalltime (generated from its argparse definitions)",
        "zsh": "#compdef softwalltime softwalltime-ingest\n"
        "# zsh completion for softwalltime (generated from its argparse definitions)",
    }[shell]
    declare = "declare -gA" if shell == "bash" else "typeset -gA"
    lines = [head]
    for name, table in (("subs", subs), ("opts", opts), ("values", values)):
        lines.append(f"{declare} _softwalltime_{name}")
        lines += _assoc(shell, f"_softwalltime_{name}", table)
    return "\n".join(lines) + (BASH_BODY if shell == "bash" else ZSH_BODY)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m softwalltime.cli.completion",
        description="Print the completion script of softwalltime for a shell.",
    )
    parser.add_argument("shell", choices=("bash", "zsh"))
    args = parser.parse_args(argv)
    sys.stdout.write(script(args.shell))
    return 0


if __name__ == "__main__":
    sys.exit(main())
