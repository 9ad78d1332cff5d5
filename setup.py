"""Only the C part of the build; everything else is in pyproject.toml.

Both extensions are optional: where no C compiler is found the install still succeeds and
indexed_fs falls back to Python for each.

* ``backends.indexed_fs._commit``: group commit outside the GIL (``stats()["group_commit"]``
  says which committer ran);
* ``backends.indexed_fs._scan``: the crash rebuild's segment walk and record resolution
  (``segment.NATIVE_WALK`` says whether it is there).
"""

from setuptools import Extension, setup

setup(ext_modules=[
    Extension("backends.indexed_fs._commit", ["backends/indexed_fs/_commit.c"],
              depends=["backends/indexed_fs/_crc32c.h"], optional=True),
    Extension("backends.indexed_fs._scan", ["backends/indexed_fs/_scan.c"],
              depends=["backends/indexed_fs/_crc32c.h"], optional=True),
])
