"""The kernel: settings, the predictors and the decision rules, pure and shared.

Python 3.6+ syntax, standard library only (pbs_server's embedded Python imports it through
the hook, see :mod:`softwalltime.hook`); no I/O but reading the settings file, no module
state. The command-line tool, the replays and the hook import these same modules, so what
they print is what the hook does. Imports nothing of softwalltime but errors and units.
"""
