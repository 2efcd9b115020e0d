"""The tests' fakes of systems the collection talks to, one per boundary: ``slurmrestd`` (over ``slurm_state``).

Importable as ``fakes`` with tests/ on the path: tests/conftest.py and the
copilot's tests/conftest.py put it there.
"""
