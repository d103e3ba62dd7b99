"""Benchmarks of sqlheads against the tools a user would otherwise pick.

Run ``python -m bench [NAME|all] [--quick]`` from the repository root (``--help`` lists the
names); results go to ``docs/benchmarks.md`` (and ``docs/benchmarks.json``) with PNG plots in
``docs/``. Benchmarks never run in the test suite: ``tests/test_bench_smoke.py`` runs each at
tiny sizes into a temporary directory so that they cannot rot.
"""
