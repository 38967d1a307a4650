"""The one compiled module of the package (``owler.parse._simhash``, Cython): everything else is in
pyproject.toml. ``make setup`` builds it in place (``pip install -e .``); without it the package
falls back to numpy (owler.parse.simhash)."""

from Cython.Build import cythonize
from setuptools import setup

setup(ext_modules=cythonize(["src/owler/parse/_simhash.pyx"], language_level=3, quiet=True))
