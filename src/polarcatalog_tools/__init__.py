"""Developer tooling beside the research library (team mode, the JupyterLab save hook, the offline plots page)."""
