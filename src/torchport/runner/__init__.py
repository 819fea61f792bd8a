"""The runner: a run's plan carried out, task by task, on this host or a cluster.

plan.py        the plan of a run: which (case, mode) tasks, and how each must be executed
stages.py      the one stage runner every ladder is built on (stages declared as data)
executors/     where tasks execute: the protocol the api drives, the local, parallel (--jobs)
               and Ray executors, the worker process and each worker's share of the host
ladders/       which ladder runs a task (one table), the model ladder and the generate ladder
ops/           the ops suite's ladders: an OpInfo op's samples, their variants, the audit
kernels/       the kernel ladder: a replacement kernel's checks, truth, timing and verdict
dist/          a world of N ranks as one task: the launcher, each rank's work, the verdict
doctor.py      what each device of this host can do, asked in a child
check_workload.py  a user's workload factory checked in a child before a run records anything

The release matrix, which runs ``torchport run`` in environments it builds, sits above the api
in ``torchport.matrix``.
"""
