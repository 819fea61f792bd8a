"""The ops suite's ladders: one OpInfo op at one dtype, run inside a worker process.

ladder.py    the op ladder: the op's samples on the device, judged against the float64 truth
samples.py   one sample run on one side (device, CPU at the dtype, CPU float64)
variants.py  the call forms OpInfo's samples leave out (--depth 3) and its error inputs (4)
audit.py     the coverage audit's ladder: the dispatcher's registry for the device's key
"""
