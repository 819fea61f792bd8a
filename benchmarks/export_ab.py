"""A/B, interleaved, CPU time of this process: exporting one 100 000-result run the old way
(every row parsed and encoded again in Python) and the new (lines built by SQLite), on the
million-result file of kb_scale.py. CPU time, because the shared machine's load makes wall
time mostly waiting.

    python benchmarks/export_ab.py   # output pasted into docs/results/export_ab.txt
"""

import io
import os
import time

from torchport.kb import open_store
from torchport.kb.exchange import _canonical, export_runs, result_line

run = "cuda-2.13"
with open_store("/work/kb1m/kb.db", write=False) as store:

    def old():
        out = io.StringIO()
        for r in store.results(run_id=run, order="case", with_ops=True, stream=True):
            out.write(_canonical(result_line(run, r)) + "\n")

    def new():
        export_runs(store, [run], io.StringIO())

    for rnd in range(2):
        for name, fn in (("old", old), ("new", new)):
            w, c = time.perf_counter(), time.process_time()
            fn()
            wall, cpu = time.perf_counter() - w, time.process_time() - c
            print(
                f"round {rnd} {name}: wall {wall:.2f} s, CPU {cpu:.2f} s, "
                f"load {os.getloadavg()[0]:.1f}",
                flush=True,
            )
