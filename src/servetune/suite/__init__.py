"""suite room."""
