"""Timing: the bench core, standalone kernel files and their runs, sweeps, peaks, twins, the byte model and speed of light."""
