"""hardware room."""
