"""``uncoordinated``: instances checkpoint on their own schedules; senders log their messages.

The protocol is :mod:`.protocol`; its parts are :mod:`.schedule` (when each instance
checkpoints), :mod:`.writer` (the asynchronous checkpoint writer of a Python worker),
:mod:`.fence` (dead incarnations never write) and :mod:`.recovery` (the recovery line of a
failed instance).  The senders' message log it shares with ``logio`` is
:mod:`spark_integration.protocols.sender_log`.
"""
