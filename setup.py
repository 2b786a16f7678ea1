"""The build steps pyproject.toml cannot declare: the C++ helpers and the dashboard bundle,
built into the wheel so that an installed tvmdbg needs neither a compiler nor Node.js.

- build_ext compiles every C++ helper with tvmdbg_tb.native's own builder (the command and
  the versioned file name that a build at first use would give) into tvmdbg_tb/native/, and
  every summary kernel into one library there (tvmdbg_tb/capture/kernel_cache.py: named
  after the TVM build it was compiled by, which an installed tvmdbg loads without compiling).
- build_py and sdist first make sure that tvmdbg_tb_frontend/dist/index.js is built from the
  current sources (tvmdbg_tb_frontend/build.sh: a no-op when its stamp matches, so an sdist,
  which ships the bundle, builds without Node.js); no bundle and no npm is an error, never a
  wheel with a blank tab.
- An editable install (scripts/setup.sh) builds neither: the helpers are built at first use
  from the sources as they are edited, and setup.sh builds the bundle.
"""

from __future__ import annotations

import importlib.util
import subprocess
from pathlib import Path

from setuptools import setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist
from setuptools.dist import Distribution

ROOT = Path(__file__).resolve().parent
# Every C++ helper and its kind (a class of tvmdbg_tb.native); tests/test_packaging.py checks
# that these are exactly the libraries the package loads.
NATIVE_SOURCES = {
    "tvmdbg_tb/native/native_records.cc": "PythonExtension",
    "tvmdbg_tb/native/native_call.cc": "TvmPythonExtension",
    "tvmdbg_tb/native/native_rows.cc": "PythonExtension",
    "tvmdbg_tb/native/native_filter.cc": "NativeLibrary",
}
BUNDLE = ROOT / "tvmdbg_tb_frontend" / "dist" / "index.js"


def _native_module():
    """tvmdbg_tb/native from this tree, without importing the tvmdbg_tb package."""
    spec = importlib.util.spec_from_file_location("_tvmdbg_native_build", ROOT / "tvmdbg_tb" / "native" / "__init__.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _kernel_cache_module():
    """tvmdbg_tb.capture.kernel_cache from this tree (it imports tvm and the light
    tvmdbg_tb package: no dependency beyond the build's)."""
    import sys

    sys.path.insert(0, str(ROOT))
    try:
        import tvmdbg_tb.capture.kernel_cache as kernel_cache
    finally:
        sys.path.remove(str(ROOT))
    return kernel_cache


def _build_bundle() -> None:
    """tvmdbg_tb_frontend/dist/index.js, built by build.sh when a source changed since."""
    script = ROOT / "tvmdbg_tb_frontend" / "build.sh"
    if script.exists() and subprocess.run(["bash", str(script)]).returncode != 0:
        raise SystemExit(
            "tvmdbg: the dashboard bundle (tvmdbg_tb_frontend/dist/index.js) is missing or older than its "
            "sources and could not be built (above: why); install Node.js >= 20 with npm, or build from a "
            "tvmdbg sdist, which ships the bundle"
        )
    if not BUNDLE.is_file() or BUNDLE.stat().st_size == 0:
        raise SystemExit(f"tvmdbg: no dashboard bundle at {BUNDLE}; a wheel without it would show a blank tab")


class BuildNative(build_ext):
    """The C++ helpers, compiled into the package (see the module docstring)."""

    def run(self) -> None:
        self._outputs = []
        if self.editable_mode:
            return
        native = _native_module()
        target = Path(self.build_lib) / "tvmdbg_tb" / "native"
        for source, kind in NATIVE_SOURCES.items():
            library = getattr(native, kind)(ROOT / source, switch="", what=source)
            print(f"tvmdbg: building {source} -> {target / library.file_name()}")
            self._outputs.append(str(library.build_into(target)))
        kernels = _kernel_cache_module()
        print(f"tvmdbg: building the summary kernels -> {target / kernels.library_file_name()}")
        self._outputs.append(str(kernels.build_library(target)))

    def get_outputs(self) -> list[str]:
        return list(getattr(self, "_outputs", []))


class BuildPy(build_py):
    """The Python package, with the dashboard bundle built first."""

    def run(self) -> None:
        if not self.editable_mode:
            _build_bundle()
        super().run()


class SourceDistribution(sdist):
    """The sdist, which ships the built bundle (so that installing it needs no Node.js)."""

    def run(self) -> None:
        _build_bundle()
        super().run()


class BinaryDistribution(Distribution):
    """A platform wheel: it holds compiled libraries (built by BuildNative, not as Extensions)."""

    def has_ext_modules(self) -> bool:
        return True


setup(
    distclass=BinaryDistribution,
    cmdclass={"build_ext": BuildNative, "build_py": BuildPy, "sdist": SourceDistribution},
)
