"""Developer tools run from the repository (not part of the installed engine)."""
