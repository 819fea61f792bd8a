"""torchport: evidence that PyTorch work runs on an accelerator, correctly and fast."""

__version__ = "0.1.0"
