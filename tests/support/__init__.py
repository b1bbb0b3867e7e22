"""Shared helpers for the test suite (fixtures call into these)."""
