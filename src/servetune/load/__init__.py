"""load room."""
