"""ldpfuse-py: file systems written in Python (fusepy's Operations API),
served inside ordinary programs by an LD_PRELOAD library."""

from . import _host_imports  # noqa: F401  first: it sees the program's imports under way
from .operations import (
    Backing,
    ENOTSUP,
    FileInfo,
    FuseOSError,
    LoggingMixIn,
    Operations,
    Passthrough,
    fuse_get_context,
)
from .union import Union

__version__ = "0.1.0"

__all__ = [
    "Backing",
    "ENOTSUP",
    "FileInfo",
    "FuseOSError",
    "LoggingMixIn",
    "Operations",
    "Passthrough",
    "Union",
    "fuse_get_context",
]
