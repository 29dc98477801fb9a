"""Talking to a live PBS server: its commands (``qstat``, ``qalter``, ``qmgr``) and logs.

Used by ``softwalltime refresh`` and ``softwalltime status``. The decisions these tools
make are pure functions here too (tested without PBS); only :mod:`.commands` runs PBS.
"""
