"""Architectures of the causal-LM mapping that cannot be exercised as a plain causal LM.

Each entry says why, as data: the case reports it as ``skip_reason`` and the runner records
``skip``. Keep this table small: a shrink rule that makes a model run beats an exclusion, and a
failure that a future transformers release might fix is better recorded than excluded.
"""

EXCLUSIONS: dict[str, str] = {
    "gemma4_assistant": (
        "speculative-decoding drafter: ignores input_ids and needs the target model's "
        "inputs_embeds and shared KV states"
    ),
    "gemma4_unified_assistant": (
        "speculative-decoding drafter: ignores input_ids and needs the target model's "
        "inputs_embeds and shared KV states"
    ),
    "git": (
        "image captioner: the loss skips the image-patch positions, so a step needs pixel_values"
    ),
    "reformer": (
        "reversible layers in train mode (where training steps run) need the sequence length "
        "to equal prod(axial_pos_shape), and one shape cannot fit both the parity size (16 "
        "tokens) and the perf size (128); with axial_pos_shape (4, 4) it passes parity on the "
        "CPU in train mode"
    ),
    "xmod": (
        "language-adapter model: needs a language id (set_default_language or lang_ids) "
        "besides input_ids"
    ),
}
