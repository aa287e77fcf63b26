"""Build of ldpfuse-py's native parts, run by `pip install .`.

Two shared objects are built and installed inside the package:

* ``ldpfuse_py/libldpfuse.so``: the LD_PRELOAD interposer (native/ minus the backend). It
  has no dependency on libpython: processes that never touch a mount never load Python.
  Only the libc wrappers are exported (a version script made from the objects' own
  symbols), so the core's names can never collide with a program's.
* ``ldpfuse_py/libldpfuse_audit.so``: the LD_AUDIT library that hands the dynamic loader
  the libraries an exec found in a mount (native/audit/).
* ``ldpfuse_py/_embedded*.so``: the embedded backend, a CPython extension module (so it
  binds to whichever libpython the process has), loaded by the interposer on demand.
"""
import os
import shlex
import shutil
import subprocess
import sysconfig

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))
NATIVE = "native"
EXTENSION_SOURCES = ("embedded.c", "killpriv.c", "signal_forward.c", "subreaper.c")    # native/backend/, and all of native/server/
# the shared mode's server, in the extension module (the launcher runs it)
SERVER_SOURCES = sorted(os.path.join(NATIVE, "server", f) for f in os.listdir(os.path.join(HERE, NATIVE, "server"))
                        if f.endswith(".c"))
PRELOAD_SOURCES = sorted(
    os.path.join(NATIVE, d, f) if d else os.path.join(NATIVE, f)
    for d in ("", "vfs", "interpose", "backend")
    for f in os.listdir(os.path.join(HERE, NATIVE, d))
    if f.endswith(".c") and f not in EXTENSION_SOURCES
)
CFLAGS = ["-O2", "-fPIC", "-fno-optimize-sibling-calls", "-Wall", "-Wextra", "-Wno-unused-parameter",
          "-Wno-missing-field-initializers",
          "-Wno-nonnull-compare", "-Wno-deprecated-declarations", "-D_GNU_SOURCE", "-pthread"]


NO_TOOLCHAIN = """ldpfuse-py: building from source needs {what}, and {missing} was not found.
  Install one (Debian/Ubuntu: apt-get install gcc libc6-dev binutils python3-dev;
  Fedora: dnf install gcc glibc-devel binutils python3-devel), or install a prebuilt
  wheel instead: pip install --only-binary ldpfuse-py ldpfuse-py"""


def check_toolchain():
    """One clear message, before any compiler is run, when the build cannot work."""
    cc = os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc"
    cc_program = shlex.split(cc)[0] if cc.strip() else "cc"
    if shutil.which(cc_program) is None:
        raise SystemExit(NO_TOOLCHAIN.format(what="a C compiler", missing=f"'{cc_program}' (the C compiler)"))
    if shutil.which("nm") is None:
        raise SystemExit(NO_TOOLCHAIN.format(what="binutils (nm)", missing="'nm'"))
    include = sysconfig.get_paths().get("include") or ""
    if not os.path.isfile(os.path.join(include, "Python.h")):
        raise SystemExit(NO_TOOLCHAIN.format(what="Python's C headers",
                                             missing=f"Python.h (in {include or 'the include dir'})"))


class BuildNative(build_ext):
    """build_ext that also builds the preload library next to the extension module."""

    def run(self):
        check_toolchain()
        super().run()
        self.build_preload()

    def build_preload(self):
        compiler = self.compiler
        tmp = os.path.join(self.build_temp, "preload")
        objects = compiler.compile(PRELOAD_SOURCES, output_dir=tmp, extra_postargs=CFLAGS,
                                   depends=[os.path.join(NATIVE, "ldpfuse.h"),
                                            os.path.join(NATIVE, "real_symbols.h"),
                                            os.path.join(NATIVE, "backend", "backend.h")])
        wrappers = [o for o in objects if os.sep + "interpose" + os.sep in o]
        exports = set()
        for o in wrappers:
            out = subprocess.run(["nm", "--defined-only", "-g", "-P", o], check=True,
                                 capture_output=True, text=True).stdout
            for line in out.splitlines():
                name, kind = line.split()[:2]
                if kind in ("T", "W"):
                    exports.add(name)
        script = os.path.join(tmp, "exports.map")
        with open(script, "w") as f:
            f.write("{\n  global:\n")
            for name in sorted(exports):
                f.write(f"    {name};\n")
            f.write("  local: *;\n};\n")
        out_dir = os.path.join(self.build_lib, "ldpfuse_py")
        if self.inplace:
            out_dir = os.path.join(HERE, "ldpfuse_py")
        os.makedirs(out_dir, exist_ok=True)
        target = os.path.join(out_dir, "libldpfuse.so")
        compiler.link_shared_object(objects, target, libraries=["dl"],
                                    extra_postargs=["-pthread", f"-Wl,--version-script={script}",
                                                    "-Wl,-z,nodelete",
                                                    # a call by name inside the library reaches
                                                    # its own wrapper, never a program's function
                                                    # of the same name, and costs no lookup at
                                                    # the first call (syscall.c)
                                                    "-Wl,-Bsymbolic-functions",
                                                    # two LOAD segments (R+X, RW), not four: every
                                                    # process maps this library, and on a VM each
                                                    # mmap at load costs microseconds
                                                    "-Wl,-z,noseparate-code"])
        self.build_audit(tmp, out_dir)
        self.build_supervisor(tmp, out_dir)

    def build_supervisor(self, tmp, out_dir):
        """ldpfuse_py/ldpfuse-supervisor: serves, from outside, the path calls of programs the
        preload cannot reach (native/supervisor/, docs/supervisor.md)."""
        sources = sorted(os.path.join(NATIVE, "supervisor", f)
                         for f in os.listdir(os.path.join(HERE, NATIVE, "supervisor")) if f.endswith(".c"))
        objects = self.compiler.compile(sources, output_dir=os.path.join(tmp, "supervisor"),
                                        extra_postargs=CFLAGS,
                                        depends=[os.path.join(NATIVE, "supervisor", "supervisor.h"),
                                                 os.path.join(NATIVE, "supervisor", "calls.h")])
        # $LDFLAGS as for the libraries (distutils adds it to shared objects only): a
        # sanitizer build's -fsanitize=... must reach this link too (tests/test_sanitizer.py)
        self.compiler.link_executable(objects, "ldpfuse-supervisor", output_dir=out_dir,
                                      extra_postargs=["-pthread", *shlex.split(os.environ.get("LDFLAGS", ""))])

    def build_audit(self, tmp, out_dir):
        """ldpfuse_py/libldpfuse_audit.so: the LD_AUDIT library an exec uses when the new
        program's libraries are in a mount (native/audit/)."""
        sources = sorted(os.path.join(NATIVE, "audit", f)
                         for f in os.listdir(os.path.join(HERE, NATIVE, "audit")) if f.endswith(".c"))
        # No libc (native/audit/sys.h says why): its own system calls and string functions
        objects = self.compiler.compile(sources, output_dir=os.path.join(tmp, "audit"),
                                        extra_postargs=[*CFLAGS, "-ffreestanding", "-fno-stack-protector",
                                                        "-fno-tree-loop-distribute-patterns"])
        self.compiler.link_shared_object(objects, os.path.join(out_dir, "libldpfuse_audit.so"),
                                         extra_postargs=["-Wl,-z,noseparate-code", "-nostdlib"])


setup(
    ext_modules=[
        Extension(
            "ldpfuse_py._embedded",
            sources=[os.path.join(NATIVE, "backend", f) for f in EXTENSION_SOURCES] + SERVER_SOURCES,
            depends=[os.path.join(NATIVE, "backend", "backend.h"), os.path.join(NATIVE, "backend", "wire.h"),
                     os.path.join(NATIVE, "server", "server.h")],
            extra_compile_args=["-O2", "-fno-optimize-sibling-calls", "-D_GNU_SOURCE", "-fvisibility=hidden"],
        )
    ],
    cmdclass={"build_ext": BuildNative},
)
