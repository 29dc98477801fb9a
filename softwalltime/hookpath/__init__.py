"""The hook path: everything pbs_server's embedded Python imports through the hook.

Python 3.6+ syntax, standard library only (plus the hook's database access in
:mod:`.lookup`): configuration, the pure predictors and decision rules, the history
lookup and the bridge from logging to ``pbs.logmsg``. The command-line tool and the
replay side import these same modules, so what they print is what the hook does.
"""
