"""``cic``: communication-induced checkpointing (CheckMate's HMNR variant) on top of ``uncoordinated``.

The rule is :mod:`.hmnr` (pure logic); :mod:`.protocol` puts it on the Spark job: piggybacks on
every message, forced checkpoints before a micro-batch is delivered, basic checkpoints on each
instance's own clock, recovery through the uncoordinated protocol's recovery line.
"""
