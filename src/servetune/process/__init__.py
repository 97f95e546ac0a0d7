"""process room."""
