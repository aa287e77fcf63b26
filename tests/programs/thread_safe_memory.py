"""The memory example declared thread_safe (its __call__ already takes one lock around every
operation): the shared-mode server then serves each connection on a thread of its own
(native/server/serve.c, serve_client) instead of its one FS thread, so the wire fuzzer
(tests/test_wire_fuzz.py) covers that path too."""

import importlib.util
import os

_spec = importlib.util.spec_from_file_location(
    "_ldpfuse_memory_example",
    os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "memory.py"))
_memory = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_memory)


class ThreadSafeMemory(_memory.Memory):
    thread_safe = True
