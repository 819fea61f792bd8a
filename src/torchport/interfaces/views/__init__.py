"""Moved to ``torchport.views`` (views are a layer below interfaces). This alias stays only
until ``run_cmd`` imports ``torchport.views``; delete it then."""

from torchport.views import build_views  # noqa: F401
