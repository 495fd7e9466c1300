"""Build script for the optional compiled speedups (`kclient._speedups`).

Everything else about the package is declared in pyproject.toml. The
extension is optional twice over: without Cython it is not even attempted,
and a failed compile (no C compiler) only prints a warning; kclient then
runs its pure-Python code (`kclient._accel` says which at DEBUG).
"""

from setuptools import Extension, setup

try:
    from Cython.Build import cythonize
except ImportError:  # e.g. --no-build-isolation without Cython installed
    ext_modules = []
else:
    ext_modules = cythonize(
        [Extension("kclient._speedups", ["kclient/_speedups.pyx"], optional=True)],
        compiler_directives={"language_level": 3},
        quiet=True,
    )
    for ext in ext_modules:
        ext.optional = True

setup(ext_modules=ext_modules)
