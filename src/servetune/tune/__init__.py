"""tune room."""
