"""Evidence from the artifacts, the rules' decision and the per-kernel report."""
