"""Features are computed once: a content-addressed cache (encoder id + view options + content hash)."""
