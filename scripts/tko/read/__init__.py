"""Readers of what a run leaves behind: autotune logs, profiler exports, Inductor files, kernel source, ISA listings, DCU tool outputs."""
