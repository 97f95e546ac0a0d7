"""engines room."""
