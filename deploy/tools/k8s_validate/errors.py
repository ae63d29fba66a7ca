"""The validator's own failures, kept apart so that each module can raise them without
importing the others."""

from __future__ import annotations


class RenderError(Exception):
    """A kustomization the Python renderer cannot or will not build."""


class SchemaSourceError(Exception):
    """The CRD schemas cannot be had (download, hash, or a model source not understood)."""
