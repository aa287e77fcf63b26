#!/usr/bin/env python
# A fusepy script given the wrong arguments: it exits before calling FUSE().
import sys

from fuse import FUSE, Operations

if __name__ == '__main__':
    if len(sys.argv) != 3:
        sys.exit('usage: %s ROOT MOUNTPOINT' % sys.argv[0])
    FUSE(Operations(), sys.argv[2], foreground=True)
