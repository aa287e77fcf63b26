# A file system that gives no st_ino: ldpfuse makes inode numbers up from paths.
import errno, stat
from ldpfuse_py import Operations, FuseOSError
class NoIno(Operations):
    def getattr(self, path, fh=None):
        if path in ("/", "/d"):
            return dict(st_mode=stat.S_IFDIR | 0o755, st_nlink=2)
        if path in ("/a", "/d/b"):
            return dict(st_mode=stat.S_IFREG | 0o644, st_size=0)
        raise FuseOSError(errno.ENOENT)
    def readdir(self, path, fh):
        return [".", "..", "a", "d"] if path == "/" else [".", "..", "b"]
