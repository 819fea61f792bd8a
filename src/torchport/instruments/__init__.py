"""Instruments: the measuring tools that probes and ladders use, never registered as probes.

Parity against the reference (``parity``, ``parity_weak``, ``op_parity``, ``token_parity``),
the device's own noise (``determinism``), the recorders (``dispatch_recorder``,
``function_recorder``, ``custom_grad``) and host evidence (``host_evidence``), compile outcome and
metrics (``compile_outcome``, ``compile_metrics``, ``compile_run``, ``compile_child``,
``compile_shapes``), FLOPs and the roofline (``flops``, ``roofline``).

This layer sits below ``torchport.probes`` and the runner and above ``torchport.execution``
(import contracts in pyproject.toml): an instrument never imports a probe. To add one: write a
module here that returns data; a probe or a ladder calls it. docs/design.md rule 10 holds for
each: an
instrument never changes the answer it reports, and one that fails records its own failure.
"""
