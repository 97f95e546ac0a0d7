"""metrics room."""
