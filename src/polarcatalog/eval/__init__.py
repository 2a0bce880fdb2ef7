"""Retrieval metrics exactly as the papers define them, and per-query audit logs."""
