"""The durability audit: drive acknowledged writes into a store, kill the process or cut the power
(:mod:`~experiments.audit.env`), and count what an acknowledged write lost
(:mod:`~experiments.audit.writer` keeps the model of what was acknowledged)."""
