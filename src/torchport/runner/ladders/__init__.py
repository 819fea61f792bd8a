"""The ladders a worker climbs for one task, and the table that picks one.

table.py     which ladder runs a task: the case's own, the scenario's, else the model ladder
model.py     the model ladder: build, place, run, compile, compiled run, parity, then probes
generate.py  the generate ladder (``--scenario generate``): the same stages over a generation

The ops, kernel and dist ladders live in their own packages (``runner.ops``,
``runner.kernels``, ``runner.dist``); all are built on ``runner/stages.py``.
"""
