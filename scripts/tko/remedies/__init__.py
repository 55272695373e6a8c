"""The remedies: bundled row kernels and their replacement, the eager-fallback A/B, trial hooks."""
