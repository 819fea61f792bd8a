"""Probes: independent passes that measure one thing over a (case, mode).

To add one: write a module with a ``Probe`` subclass (``name``, ``version``, ``run``) and
register it under the ``torchport.probes`` entry-point group. ``run`` returns a ``ProbeReport``
and never raises: an exception inside becomes the report's ``error``.

This package holds the registered probes only (and their ``base`` and ``registry``); the
measuring tools they share (parity, recorders, determinism, compile metrics, FLOPs) live one layer
below, in ``torchport.instruments`` (tests/probes/test_registry.py checks the folder).
"""
