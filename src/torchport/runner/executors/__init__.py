"""Executors: where a run's tasks execute, behind the one protocol the api drives.

protocol.py      the ``Executor`` protocol, deadlines and the one dispatch loop
local.py         one supervised worker process on this host, tasks in order
parallel.py      ``--jobs N``: N warm workers at once, each with its share (shares.py)
ray_executor.py  ``--executor ray``: the workers as Ray actors (ray_slot.py), Ray placing them
worker.py        the worker process: runs the tasks it is sent, each on its ladder
"""
