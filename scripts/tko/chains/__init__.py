"""The chains that drive the other floors: investigate (pipeline) and the remedy trials."""
