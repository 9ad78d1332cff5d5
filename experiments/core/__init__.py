"""The core of every store experiment: a run spec, a run with its baseline legs, compares and
sweeps of runs, and the result documents (schemas, environment, JSON) every family writes."""
