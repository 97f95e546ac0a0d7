"""report room."""
