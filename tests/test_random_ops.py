"""A random-operation checker (tests/programs/random_ops.c, in the spirit of fsx)
on cached files: reads, writes, truncations, fallocate in every mode the FS can
be told of (grow, keep size, punch hole, zero range), posix_fallocate, mmap reads
and stores, and close + reopen, each checked against a model of the file after
every step. Built with -D_FILE_OFFSET_BITS=64, so that fallocate is fallocate64,
as in fsx and most distributions' binaries.

The same seeds run natively first (the model itself is right there).
LDPFUSE_RANDOM_OPS_STEPS and LDPFUSE_RANDOM_OPS_SEEDS raise the defaults."""

import os

import pytest

from conftest import LOOPBACK, MEMORY, build_program

STEPS = int(os.environ.get("LDPFUSE_RANDOM_OPS_STEPS", "1500"))
SEEDS = int(os.environ.get("LDPFUSE_RANDOM_OPS_SEEDS", "3"))


@pytest.fixture(scope="module")
def random_ops(tmp_path_factory):
    return build_program(tmp_path_factory, "random_ops", "-D_FILE_OFFSET_BITS=64")


@pytest.mark.parametrize("fs,options", [(MEMORY, {}), (LOOPBACK, {"passthrough": "no"})],
                         ids=["memory", "loopback-no-passthrough"])
def test_random_operations_on_a_cached_file_match_the_model(ws, random_ops, fs, options):
    script = "".join(f'"$PROG" "$D/f{seed}" {seed} {STEPS}\n' for seed in range(1, SEEDS + 1))
    native, _ = ws.compare_sh(script, fs=fs, options=options, env_extra={"PROG": random_ops},
                              timeout=60 + STEPS * SEEDS // 50)
    assert native.stdout == f"ok {STEPS}\n" * SEEDS


@pytest.mark.parametrize("fs,options", [(MEMORY, {}), (LOOPBACK, {"passthrough": "no"})],
                         ids=["memory", "loopback-no-passthrough"])
def test_bytes_stored_past_the_end_through_a_mapping_read_as_zeros_once_the_file_grows(ws, random_ops, fs,
                                                                                         options):
    """fsx -e: the page cache is a tmpfs memfd, which keeps such bytes (tmpfs natively
    fails this too); the file system grew with zeros, and so must the cache. Checked
    against the model only (ext4, where a native run would go, zeroes them itself)."""
    r = ws.ldp_run(["sh", "-c", f'"$PROG" "$D/f" 5 {STEPS} pollute'], fs=fs, options=options,
                   env_extra={"PROG": random_ops}, timeout=60 + STEPS // 50)
    assert r.returncode == 0 and r.stdout == f"ok {STEPS}\n", r.describe()
