"""plan room."""
