"""Helpers every side of the launcher shares (standard library only): the one
atomic file writer, the API-key rule, the node's process helpers, the input
checks. Nothing here imports another part of the launcher but ``common``."""
