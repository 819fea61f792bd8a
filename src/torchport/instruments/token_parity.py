"""Generation parity: the device's greedy tokens against the float64 CPU reference's.

A device can run fast and answer differently. Both sides generate freely from the same prompt;
the first position where any row's token differs is the **divergence**. Up to and including it
both sides computed their logits from the same history, so the logits of those steps are
compared by the tensor parity rule (``parity.compare``: tolerance, CPU-baseline allowance,
per-dtype ceiling). After it the histories differ and nothing more is compared.

Verdict: logits within tolerance up to the divergence pass; a divergence then is a near-tie
(the reference's two best logits closer than the error allowed), recorded with the reference's
margin at that step. Logits outside tolerance fail, diverged or not.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from torchport.instruments import parity

PROBE_VERSION = 1


def first_divergence(tokens, reference_tokens) -> int | None:
    """The first step (column) where any row differs; None when every token matches."""
    import torch

    differs = (tokens != reference_tokens).any(dim=0)  # (N,)
    hits = torch.nonzero(differs)
    return int(hits[0, 0]) if hits.numel() else None


@dataclass
class TokenParity:
    steps: int
    divergence: int | None
    report: parity.ParityReport
    margin: float | None = None  # the reference's top-1 minus top-2 logit at the divergence
    notes: list = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.report.ok

    def metrics(self) -> dict:
        found: dict[str, float] = {
            "generate_steps": self.steps,
            "generate_matching_tokens": self.steps if self.divergence is None else self.divergence,
        }
        if self.divergence is not None:
            found["generate_first_divergence"] = self.divergence
        if self.margin is not None:
            found["generate_divergence_margin"] = self.margin
        for key, value in self.report.metrics().items():
            if value is not None:
                found[key.replace("parity_", "generate_logits_", 1)] = value
        return found

    def findings(self) -> dict:
        return {
            "steps": self.steps,
            "first_divergence": self.divergence,
            "compared_steps": self.steps if self.divergence is None else self.divergence + 1,
            "reference_margin_at_divergence": self.margin,
            "logits": self.report.findings(),
            "verdict": self.verdict(),
            "notes": self.notes,
        }

    def verdict(self) -> str:
        if not self.ok:
            where = "" if self.divergence is None else f"; tokens diverge at step {self.divergence}"
            return "logits outside tolerance" + where
        if self.divergence is None:
            return f"all {self.steps} tokens match"
        return (
            f"tokens diverge at step {self.divergence} at a near-tie (the reference's two best "
            f"logits {self.margin:.3g} apart), logits within tolerance up to it"
        )

    def message(self) -> str:
        return "generation: " + self.verdict() + "; " + self.report.message()


def compare(device: dict, reference: dict, baseline: dict, *, atol, rtol, dtype, basis):
    """``device``/``reference``/``baseline``: {"tokens": (B, N) int, "logits": (B, N, V)}."""
    steps = int(reference["tokens"].shape[1])
    divergence = first_divergence(device["tokens"], reference["tokens"])
    upto = steps if divergence is None else divergence + 1

    def head(side: dict) -> dict:
        return {"logits": side["logits"][:, :upto]}

    report = parity.compare(
        head(device),
        head(reference),
        head(baseline),
        atol=atol,
        rtol=rtol,
        low_precision=dtype in ("bfloat16", "float16"),
        dtype=dtype,
        basis=basis,
    )
    found = TokenParity(steps=steps, divergence=divergence, report=report)
    if divergence is not None:
        top2 = reference["logits"][:, divergence].double().topk(2, dim=-1).values  # (B, 2)
        found.margin = float((top2[:, 0] - top2[:, 1]).min())
    baseline_divergence = first_divergence(baseline["tokens"], reference["tokens"])
    if baseline_divergence is not None:
        found.notes.append(
            f"the CPU at {dtype} diverges from float64 at step {baseline_divergence} too"
        )
    return found
