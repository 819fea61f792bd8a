"""A stand-in for an environment's ``torchport run`` (tests/matrix/test_matrix.py): records
tests/kb.py's sample run through the store API, no torch. ``STUB_FAIL=case`` records that
case's eager result as an eager failure; ``STUB_COMPILE_S``: the cold compile wait of the
passing compiled results (default 12); ``STUB_INTERRUPT=1`` records the run interrupted and
exits 130; ``--resume RUN`` finishes that run. Each new run leaves a reference file
named by ``STUB_TORCH`` in the shared reference cache, as a real run would."""

from __future__ import annotations

import os
import sys
import uuid

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from tests import kb  # noqa: E402
from torchport.kb import open_store  # noqa: E402


def main(argv: list[str]) -> int:
    db = argv[argv.index("--db") + 1]
    if "--resume" in argv:
        with open_store(db, write=True) as store:
            store.update_run(argv[argv.index("--resume") + 1], state="complete")
        return 0
    labels = dict(argv[i + 1].split("=", 1) for i, a in enumerate(argv) if a == "--label")
    results = kb.results()
    for r in results:
        if r["case"] == os.environ.get("STUB_FAIL") and r["mode"] == "eager":
            r["status"], r["stage"] = "eager_fail", "eager"
            r["error"] = {"type": "RuntimeError", "message": "planted by the stub"}
        if r["mode"] == "compile" and r["status"] == "pass":
            r["metrics"]["compile_cold_first_step_s"] = float(os.environ.get("STUB_COMPILE_S", 12))
    # a float64 reference as the real run caches one: by torch version, in the shared folder
    reference = os.path.join(
        os.environ["TORCHPORT_REFERENCE_CACHE"], f"stub-{os.environ.get('STUB_TORCH', '2.13')}.pt"
    )
    if not os.path.exists(reference):
        open(reference, "w").close()
    run_id = uuid.uuid4().hex[:8]
    kb.build(db, run_id=run_id, labels=labels, results_=results, command=" ".join(argv))
    if os.environ.get("STUB_SLEEP_S"):  # a run that hangs; SIGTERM ends it interrupted
        import signal
        import time

        signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
        time.sleep(float(os.environ["STUB_SLEEP_S"]))
    if os.environ.get("STUB_INTERRUPT"):
        with open_store(db, write=True) as store:
            store.update_run(run_id, state="interrupted")
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
