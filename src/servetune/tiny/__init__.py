"""tiny room."""
