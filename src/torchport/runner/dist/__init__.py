"""The dist suite: a world of N ranks run and judged as one supervised task.

ladder.py       the dist ladder: the world's verdict from its ranks' reports
launch.py       the N ranks started (processes or torchrun) under one deadline
rank.py         one rank (``python -m torchport.runner.dist.rank SPEC.json``)
guard.py        what a rank checks around its collectives: backend, deadline, data moves
collectives.py  collective conformance and bandwidth, as run by each rank
train.py        training parity of one strategy, as run by each rank
world.py        what a world's reports say, and where a rank that did not report was
"""
