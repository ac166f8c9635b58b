"""pario's packaging build: the metadata is pyproject.toml's; this adds the C products of
src/pario/native/build.py (the one build definition, also scripts/build_native.py's) to
every build of the package: ``pip install .``, ``pip install -e .``, an sdist's wheel, a wheel.

``mpicc`` comes from the ``mpich`` build requirement (pyproject.toml), as mpi4py and h5py
build against the MPI they find.  An editable install builds in place (src/pario/native/).
"""

import importlib.util
import os
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("pario_native_build", HERE / "src" / "pario" / "native" / "build.py")
native_build = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(native_build)


class NativeProduct(Extension):
    """One product of build.py, built by its own command (``command(out, installed)``) rather
    than by setuptools' compiler; ``filename``: its file name when not a Python extension's."""

    def __init__(self, name: str, sources: list[str], command, filename: str | None = None):
        super().__init__(name, sources=[f"src/pario/native/{s}" for s in sources])
        self.command, self.filename = command, filename


class BuildNative(build_ext):
    """build_ext running build.py's commands; the library's run path is the installed
    package's (build.RUNPATH_INSTALLED), or this environment's when built in place."""

    def run(self):
        # setuptools builds into build_lib and copies in place afterwards: remember which
        self.installed = not (self.inplace or getattr(self, "editable_mode", False))
        super().run()

    def get_ext_filename(self, fullname: str) -> str:
        # called with the full dotted name and (distutils' get_ext_fullpath) its last part
        name = super().get_ext_filename(fullname)
        ext = next((e for e in self.extensions if fullname in (e.name, e.name.rpartition(".")[2])), None)
        if ext is not None and ext.filename:
            return os.path.join(os.path.dirname(name), ext.filename)
        return name

    def build_extension(self, ext: NativeProduct):
        out = Path(self.get_ext_fullpath(ext.name))
        print(f"building {ext.name} ({out.name})", flush=True)
        try:
            native_build.compile_to(ext.command(out, self.installed), out)
        except native_build.BuildError as exc:
            raise SystemExit(f"pario: {exc}") from None


setup(
    ext_modules=[
        NativeProduct(native_build.RMT_MODULE, native_build.RMT_SOURCES,
                      lambda out, installed: native_build.rmt_command(out)),
        NativeProduct(native_build.COLLECTIVE_MODULE, native_build.COLLECTIVE_MODULE_SOURCES,
                      lambda out, installed: native_build.collective_command(
                          out, native_build.RUNPATH_INSTALLED if installed else native_build.runpath_inplace())),
        NativeProduct("pario.native.libpario_trace", native_build.TRACER_LIB_SOURCES,
                      lambda out, installed: native_build.tracer_command(
                          out, native_build.RUNPATH_INSTALLED if installed else native_build.runpath_inplace()),
                      filename=native_build.LIB_NAME),
    ],
    cmdclass={"build_ext": BuildNative},
)
