"""What is installed into the user's program: the capture patch, config pins, the profile bootstrap."""
