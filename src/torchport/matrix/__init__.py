"""``torchport matrix``: the same evaluation in several software environments, into one
knowledge base. An orchestrator above the api: it builds one environment per release (uv) and
runs the ``torchport`` installed there in a child, labelled so that its runs pair up.

This module is the matrix's one entry: the interfaces import from here, never from the modules
beside it (an import-linter contract in pyproject.toml holds it).

run.py     the matrix file read and checked, each environment's runs supervised, resumed
envs.py    one virtual environment per spec, built with uv, with the lock of what it resolved
checks.py  commands run in an environment after its runs, each kept in a file of its own
"""

from torchport.matrix.envs import Indexes
from torchport.matrix.run import (
    DEFAULT_RUN,
    Matrix,
    MatrixError,
    load_matrix,
    parse_env,
    run_groups,
    run_matrix,
    select_checks,
    select_runs,
    with_overrides,
)

__all__ = [
    "DEFAULT_RUN",
    "Indexes",
    "Matrix",
    "MatrixError",
    "load_matrix",
    "parse_env",
    "run_groups",
    "run_matrix",
    "select_checks",
    "select_runs",
    "with_overrides",
]
