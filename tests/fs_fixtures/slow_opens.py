"""A loopback of a lower tree (its data through the class: passthrough=no) whose open of a
name starting with 'slow' takes 0.6 s, served by a thread per connection (thread_safe):
another process's writes go on meanwhile, between the open's lookup and its page cache
(tests/test_cache.py)."""
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples"))

from loopback import Loopback  # noqa: E402


class SlowOpens(Loopback):
    thread_safe = True

    def __init__(self, root):
        super().__init__(root, passthrough="no")

    def open(self, path, flags):
        if os.path.basename(path).startswith("slow"):
            time.sleep(0.6)
        return super().open(path, flags)
