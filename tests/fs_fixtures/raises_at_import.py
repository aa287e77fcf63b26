"""A file system module that fails while it is imported (tests/test_bad_input.py)."""

from ldpfuse_py import Operations


class Never(Operations):
    pass


raise RuntimeError("this module raises at import on purpose")
