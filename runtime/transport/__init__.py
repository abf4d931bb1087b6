"""Transports: how envelopes travel between nodes (memory for tests, HTTP for real)."""
