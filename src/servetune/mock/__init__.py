"""mock room."""
