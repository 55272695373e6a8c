"""Offline compilation of a kernel for any arch, and the probes built on it."""
