"""The kernels suite: a replacement kernel evaluated inside the real model.

ladder.py         the kernel ladder: its stages and the verdict
op_stages.py      the stages that need no whole model: the op called, opcheck, gradcheck
checks.py         the registration checks (does the op run, is it registered right)
variants.py       the layouts and sizes a kernel gets wrong, made from the user's samples
truth.py          a replacement judged against the float64 truth
timing.py         the op alone and the whole step, with and without it, interleaved
speed_verdict.py  when a timed A/B decides ``correct_faster`` / ``correct_slower``
"""
