"""Shared execution helpers below both the runner and the probes.

Moving workloads between devices (``steps``), building a case the one way every process builds
it (``build``), the event channel (``channel``), the one supervised child process (``child``)
and the environment fingerprint (``environment``). Nothing here knows about probes or runs.
"""
