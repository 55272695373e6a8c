"""The environment record (triton_env/1) and DCU validation."""
