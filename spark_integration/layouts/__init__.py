"""Checkpoint layouts: how a protocol's named checkpoint becomes store records (``--layout``).

:mod:`.base` holds what every layout shares (commit records, atomicity, splitting at the
backend's value limit, batching); one module per layout (:mod:`.changelog`, :mod:`.per_key`,
:mod:`.chunks`); :mod:`.registry` maps names to them.
"""
