"""spark-submit entry points (each file is a job script)."""
