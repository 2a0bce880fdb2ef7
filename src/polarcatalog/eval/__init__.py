"""Evaluation protocol: metrics exactly as the papers define them, and the species folds of cross-fitting."""
