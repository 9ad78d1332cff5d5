"""Only the C part of the build; everything else is in pyproject.toml.

``backends.indexed_fs._commit`` (group commit outside the GIL, see its source) is optional: where
no C compiler is found the install still succeeds and indexed_fs uses its pure-Python committer
(``stats()["group_commit"]`` says which one ran).
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("backends.indexed_fs._commit", ["backends/indexed_fs/_commit.c"],
                             optional=True)])
