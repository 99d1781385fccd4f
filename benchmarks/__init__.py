"""pytest-benchmark benchmarks of the generator; run by `tox -e bench`, not by the default `pytest`."""
