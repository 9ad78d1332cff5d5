"""Checkpointing protocols: one interface (:mod:`.base`), one module per protocol, one table
naming them (:mod:`.registry`) and the typed messages between driver and instances (:mod:`.tokens`)."""
