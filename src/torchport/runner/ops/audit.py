"""The ladder of the ``ops`` suite's coverage audit (``audit/dispatcher``): one stage that reads
the dispatcher's registry for the device's dispatch key in the worker, where the backend is
loaded (``instruments/op_coverage.py``), and keeps it as data in findings["coverage_audit"].

It runs no op: its status is ``pass`` when the registry was read (partly read: still a pass,
with what could not be read in the audit's notes), ``run``'s failure status when it could not be
read at all. ``views/op_coverage.py`` joins it with the run's dispatched ops ("X of Y").
"""

from __future__ import annotations

from torchport.runner.stages import Stage, StageRunner


class AuditLadder(StageRunner):
    STAGES = (Stage("run", "_audit", synchronise=False, then="_keep"),)
    EXPLAINS = False

    def begin(self) -> None:
        self.out.findings.update({"ladder": "audit", "tags": list(self.case.tags)})

    def _audit(self) -> dict:
        from torchport.instruments import op_coverage

        return op_coverage.audit(self.adapter.device().split(":")[0])

    def _keep(self, audit: dict) -> None:
        self.out.findings["coverage_audit"] = audit
        self.out.metrics["audit_overloads"] = len(audit["overloads"])
